// Where a process sits in a launch (train/distributed/env.h), read from each launcher's variables:
// what mpirun, srun, hydra and torchrun set, and the errors for values that are not numbers.
#include <catch2/catch.hpp>

#include <map>
#include <string>

#include "tessera/core/error.h"
#include "tessera/train/distributed/env.h"

using namespace tessera;
using train::dist::launch_env_from;
using train::dist::LaunchEnv;

namespace {

LaunchEnv from(const std::map<std::string, std::string>& vars) {
  return launch_env_from([&](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

}  // namespace

TEST_CASE("launch_env: each launcher's rank, world and local sizes", "[distributed]") {
  const LaunchEnv alone = from({});
  CHECK((!alone.distributed() && alone.rank == 0 && alone.local_size == 1 && alone.launcher.empty()));

  const LaunchEnv ompi = from({{"OMPI_COMM_WORLD_SIZE", "4"},
                               {"OMPI_COMM_WORLD_RANK", "3"},
                               {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                               {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}});
  CHECK((ompi.world_size == 4 && ompi.rank == 3 && ompi.local_rank == 1 && ompi.local_size == 2));

  const LaunchEnv torchrun = from({{"WORLD_SIZE", "8"}, {"RANK", "5"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "4"}});
  CHECK((torchrun.world_size == 8 && torchrun.rank == 5 && torchrun.local_rank == 1 && torchrun.local_size == 4));
}

TEST_CASE("launch_env: under srun the ranks on a node are that node's entry of Slurm's tasks per node",
          "[distributed]") {
  // srun -n 7 over 4 nodes: 2, 2, 2 and 1 tasks. Before, local_size was 1 under srun, so each rank
  // took every core: other thread counts than mpirun's, other bits.
  const std::map<std::string, std::string> base{{"SLURM_NTASKS", "7"},
                                                {"SLURM_PROCID", "6"},
                                                {"SLURM_LOCALID", "0"},
                                                {"SLURM_STEP_TASKS_PER_NODE", "2(x3),1"},
                                                {"SLURM_TASKS_PER_NODE", "9"}};
  for (const auto& [node, expected] : std::map<std::string, int>{{"0", 2}, {"2", 2}, {"3", 1}}) {
    auto vars = base;
    vars["SLURM_NODEID"] = node;
    const LaunchEnv env = from(vars);
    INFO("node " << node);
    CHECK((env.world_size == 7 && env.rank == 6 && env.local_size == expected && env.launcher == "SLURM_NTASKS"));
  }
  // The allocation's tasks per node when the step's are not set; one node, no SLURM_NODEID: node 0.
  CHECK(from({{"SLURM_NTASKS", "2"}, {"SLURM_PROCID", "1"}, {"SLURM_TASKS_PER_NODE", "2"}}).local_size == 2);
  CHECK(from({{"SLURM_NTASKS", "2"}, {"SLURM_PROCID", "1"}}).local_size == 1);
  // Open MPI's own count, once MPI has set it, comes first.
  CHECK(from({{"SLURM_NTASKS", "2"},
              {"SLURM_PROCID", "1"},
              {"SLURM_TASKS_PER_NODE", "2"},
              {"OMPI_COMM_WORLD_LOCAL_SIZE", "1"}})
            .local_size == 1);
  for (const char* spec : {"2(x3", "two", "2,,1", "0", "2(x0)", "2(x2)"}) {  // the last has no entry for node 3
    INFO(spec);
    CHECK_THROWS_WITH(
        from(
            {{"SLURM_NTASKS", "7"}, {"SLURM_PROCID", "0"}, {"SLURM_NODEID", "3"}, {"SLURM_STEP_TASKS_PER_NODE", spec}}),
        Catch::Contains("SLURM_STEP_TASKS_PER_NODE='") && Catch::Contains("node 3"));
  }
}

TEST_CASE("launch_env: a value that is not a number in range names the variable", "[distributed]") {
  CHECK_THROWS_WITH(from({{"WORLD_SIZE", "four"}}), Catch::Contains("WORLD_SIZE='four'"));
  CHECK_THROWS_WITH(from({{"WORLD_SIZE", "2"}}), Catch::Contains("no rank variable"));
  CHECK_THROWS_WITH(from({{"WORLD_SIZE", "2"}, {"RANK", "2"}}), Catch::Contains("RANK=2 is not below WORLD_SIZE=2"));
}
