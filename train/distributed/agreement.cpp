#include "tessera/train/distributed/agreement.h"

#include "tessera/core/error.h"

namespace tessera::train::dist {

namespace {

std::string serialize(const Facts& facts) {
  std::string s;
  for (const auto& [name, value] : facts) s += name + '\t' + value + '\n';
  return s;
}

Facts parse(const std::string& s) {
  Facts facts;
  size_t begin = 0;
  while (begin < s.size()) {
    const size_t tab = s.find('\t', begin), end = s.find('\n', begin);
    facts.emplace_back(s.substr(begin, tab - begin), s.substr(tab + 1, end - tab - 1));
    begin = end + 1;
  }
  return facts;
}

std::string value_of(const Facts& facts, const std::string& name) {
  for (const auto& [n, v] : facts)
    if (n == name) return v;
  return "(not set)";
}

// The first difference between this rank's facts and rank 0's, or "".
std::string first_difference(const Facts& mine, const Facts& root, int rank) {
  for (const auto& [name, value] : mine) {
    const std::string theirs = value_of(root, name);
    if (theirs != value)
      return "rank " + std::to_string(rank) + " has " + name + " = " + value + " where rank 0 has " + name + " = " +
             theirs;
  }
  for (const auto& [name, value] : root)
    if (value_of(mine, name) == "(not set)")
      return "rank " + std::to_string(rank) + " has no " + name + " where rank 0 has " + name + " = " + value;
  return "";
}

}  // namespace

void check_agreement(Communicator& comm, const Facts& facts) {
  const Facts root = parse(comm.broadcast_string(serialize(facts), 0));
  const std::string difference = first_difference(facts, root, comm.rank());
  // The lowest disagreeing rank tells everyone what differs, so that every rank exits with it.
  Tensor first = Tensor::empty({1}, DType::Int64, Device::cpu());
  first.data<int64_t>()[0] = difference.empty() ? comm.size() : comm.rank();
  Tensor reduced = comm.device().is_cpu() ? first : first.to(comm.device());
  comm.allreduce(reduced, ReduceOp::Min);
  const int64_t culprit = reduced.to(Device::cpu()).data<int64_t>()[0];
  if (culprit == comm.size()) return;
  const std::string message = comm.broadcast_string(difference, static_cast<int>(culprit));
  throw Error("distributed training: the ranks disagree at start: " + message +
              ". Every rank must run the same model with the same flags.");
}

}  // namespace tessera::train::dist
