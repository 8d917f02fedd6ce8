// `tessera ops`: every public op with its family and what the ONNX exporter makes of it (from the
// op list, ops/op_list.h), then every kernel table (the device-dispatched unit of an op), the public
// ops it serves, and the devices that implement it (from ops/kernels/registry.h).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tessera/core/backend.h"
#include "tessera/io/json.h"
#include "tessera/ops/kernels/registry.h"
#include "tessera/ops/op_list.h"
#include "tools/cli/args.h"
#include "tools/cli/commands.h"

namespace tessera::cli {

namespace {

struct DeviceColumn {
  const char* name;
  DeviceType type;
};
constexpr DeviceColumn kColumns[] = {{"cpu", DeviceType::CPU}, {"cuda", DeviceType::CUDA}};

std::vector<std::string> devices_of(const KernelTableInfo& k) {
  std::vector<std::string> out;
  for (const DeviceColumn& c : kColumns)
    if (k.has(c.type)) out.emplace_back(c.name);
  return out;
}

// What `tessera export` makes of an op (ops/op_list.h's trace column).
const char* onnx_form(OpTrace trace) {
  switch (trace) {
    case OpTrace::Lowered: return "exported";
    case OpTrace::Refused: return "refused";
    case OpTrace::Untraced: return "untraced: the ops it runs are";
  }
  return "";
}

// "a b"
std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : " ") + item;
  return out;
}

void print_json(DeviceBackend* cuda) {
  json::Writer w;
  w.begin_object().key("devices").begin_object().key("cpu").value("built in").key("cuda");
  if (cuda) w.value(cuda->description());
  else w.null();
  w.end_object().key("ops").begin_array();
  for (const OpDecl& op : all_ops())
    w.begin_object()
        .key("name")
        .value(op.name)
        .key("family")
        .value(op.family)
        .key("onnx")
        .value(onnx_form(op.trace))
        .end_object();
  w.end_array().key("kernels").begin_array();
  for (const KernelTableInfo& k : kernel_tables()) {
    w.begin_object().key("name").value(k.name).key("family").value(k.family).key("ops").value(k.serves);
    w.key("devices").begin_array();
    for (const std::string& d : devices_of(k)) w.value(d);
    w.end_array().end_object();
  }
  w.end_array().end_object();
  std::puts(w.str().c_str());
}

}  // namespace

int run_ops(const Argv& args) {
  ArgParser p("ops", "List every public op, and every op kernel with the devices that implement it.");
  p.flag("--json", "print one JSON object: the devices of this build, every op, and every kernel with its devices");
  if (!p.parse(args)) return 0;
  DeviceBackend* cuda = find_backend(DeviceType::CUDA);
  if (p.is_set("--json")) {
    print_json(cuda);
    return 0;
  }
  std::printf("cuda backend: %s\n\n", cuda ? cuda->description().c_str()
                                           : "not built (configure with -DTESSERA_CUDA=ON or -DTESSERA_CUDA_EMU=ON)");
  std::printf("%-24s %-14s %s\n", "op", "family", "onnx");
  for (const OpDecl& op : all_ops()) std::printf("%-24s %-14s %s\n", op.name, op.family, onnx_form(op.trace));
  std::printf("\n");
  int name_width = 6, family_width = 6;  // the longest kernel and family names make the first columns
  for (const KernelTableInfo& k : kernel_tables()) {
    name_width = std::max(name_width, static_cast<int>(std::strlen(k.name)));
    family_width = std::max(family_width, static_cast<int>(std::strlen(k.family)));
  }
  std::printf("%-*s %-*s %-10s %s\n", name_width, "kernel", family_width, "family", "devices", "ops");
  int missing_on_cuda = 0;
  for (const KernelTableInfo& k : kernel_tables()) {
    std::printf("%-*s %-*s %-10s %s\n", name_width, k.name, family_width, k.family, join(devices_of(k)).c_str(),
                k.serves);
    missing_on_cuda += cuda && !k.has(DeviceType::CUDA);
  }
  if (cuda) std::printf("\n%d kernel%s missing on cuda\n", missing_on_cuda, missing_on_cuda == 1 ? "" : "s");
  return 0;
}

}  // namespace tessera::cli
