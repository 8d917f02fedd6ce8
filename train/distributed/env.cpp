#include "tessera/train/distributed/env.h"

#include <cstdlib>
#include <initializer_list>
#include <stdexcept>
#include <string>

#include "tessera/core/error.h"

namespace tessera::train::dist {

namespace {

struct Found {
  int value = -1;
  const char* name = nullptr;
};

// The first of `names` that is set, parsed as an integer >= minimum.
Found first_set(const std::function<const char*(const char*)>& lookup, std::initializer_list<const char*> names,
                int minimum) {
  for (const char* name : names) {
    const char* v = lookup(name);
    if (!v || !*v) continue;
    char* end = nullptr;
    const long n = std::strtol(v, &end, 10);
    TS_CHECK(*end == '\0' && n >= minimum && n < (1L << 24), "launch environment: ", name, "='", v,
             "' is not an integer >= ", minimum);
    return {static_cast<int>(n), name};
  }
  return {};
}

// Slurm's tasks on node `node` from SLURM_STEP_TASKS_PER_NODE / SLURM_TASKS_PER_NODE: counts per
// node in node order, a run of equal ones written "count(xrepeat)", e.g. "2(x3),1" for 2, 2, 2, 1.
Found slurm_tasks_on_node(const char* name, const char* spec, int node) {
  const std::string text = spec;
  const auto bad = [&] {
    return Error(detail::concat("launch environment: ", name, "='", text, "' is not Slurm's tasks per node ",
                                "(counts such as 2(x3),1) or has no entry for node ", node));
  };
  size_t at = 0;
  for (int first = 0; at < text.size();) {
    size_t used = 0;
    int count = 0, repeat = 1;
    try {
      count = std::stoi(text.substr(at), &used);
      at += used;
      if (text.compare(at, 2, "(x") == 0) {
        repeat = std::stoi(text.substr(at + 2), &used);
        at += 2 + used;
        if (text.compare(at, 1, ")") != 0) throw bad();
        ++at;
      }
    } catch (const std::logic_error&) { throw bad(); }
    if (count < 1 || repeat < 1) throw bad();
    if (node < first + repeat) return {count, name};
    first += repeat;
    if (at < text.size() && text[at++] != ',') throw bad();
  }
  throw bad();
}

}  // namespace

LaunchEnv launch_env_from(const std::function<const char*(const char*)>& lookup) {
  LaunchEnv env;
  const Found world = first_set(lookup, {"WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE"}, 1);
  if (!world.name) return env;
  const Found rank = first_set(lookup, {"RANK", "PMI_RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK"}, 0);
  const Found local =
      first_set(lookup, {"LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK"}, 0);
  env.world_size = world.value;
  env.launcher = world.name;
  TS_CHECK(rank.name || env.world_size == 1, "launch environment: ", world.name, "=", world.value,
           " but no rank variable (RANK, PMI_RANK, SLURM_PROCID or OMPI_COMM_WORLD_RANK) is set");
  env.rank = rank.name ? rank.value : 0;
  TS_CHECK(env.rank < env.world_size, "launch environment: ", rank.name, "=", env.rank, " is not below ", world.name,
           "=", env.world_size);
  env.local_rank = local.name ? local.value : 0;
  Found local_size = first_set(lookup, {"LOCAL_WORLD_SIZE", "MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE"}, 1);
  // srun sets none of those: its ranks would each take every core (and train on other thread
  // counts than mpirun's, so to other bits). Slurm says how many tasks each node runs.
  if (!local_size.name && env.launcher == "SLURM_NTASKS") {
    const Found node = first_set(lookup, {"SLURM_NODEID"}, 0);
    for (const char* name : {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"}) {
      const char* spec = lookup(name);
      if (!spec || !*spec) continue;
      local_size = slurm_tasks_on_node(name, spec, node.name ? node.value : 0);
      break;
    }
  }
  env.local_size = local_size.name ? local_size.value : 1;
  return env;
}

LaunchEnv launch_env() {
  return launch_env_from([](const char* name) { return std::getenv(name); });
}

}  // namespace tessera::train::dist
