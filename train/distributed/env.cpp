#include "tessera/train/distributed/env.h"

#include <cstdlib>
#include <initializer_list>
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
  TS_CHECK(env.rank < env.world_size, "launch environment: ", rank.name, "=", env.rank, " is not below ",
           world.name, "=", env.world_size);
  env.local_rank = local.name ? local.value : 0;
  const Found local_size = first_set(lookup, {"LOCAL_WORLD_SIZE", "MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE"}, 1);
  env.local_size = local_size.name ? local_size.value : 1;
  return env;
}

LaunchEnv launch_env() {
  return launch_env_from([](const char* name) { return std::getenv(name); });
}

}  // namespace tessera::train::dist
