// Where this process sits in a launch, read from the launcher's environment, as timm's
// world_info_from_env does: mpirun (Open MPI), srun (Slurm), MPICH's hydra (PMI) or torchrun.
//
//   rank        RANK > PMI_RANK > SLURM_PROCID > OMPI_COMM_WORLD_RANK
//   world size  WORLD_SIZE > PMI_SIZE > SLURM_NTASKS > OMPI_COMM_WORLD_SIZE
//   local rank  LOCAL_RANK > MPI_LOCALRANKID > SLURM_LOCALID > OMPI_COMM_WORLD_LOCAL_RANK
//   local size  LOCAL_WORLD_SIZE > MPI_LOCALNRANKS > OMPI_COMM_WORLD_LOCAL_SIZE, under srun this
//               node's entry (SLURM_NODEID) of SLURM_STEP_TASKS_PER_NODE > SLURM_TASKS_PER_NODE
//               ("2(x3),1": 2 tasks on nodes 0-2, 1 on node 3); else 1
//
// With none of them set the process is alone (rank 0 of 1) and needs no MPI at run time.
#pragma once
#include <functional>
#include <string>

namespace tessera::train::dist {

struct LaunchEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;    // picks the GPU on a machine
  int local_size = 1;    // ranks on this machine (they share its cores)
  std::string launcher;  // the variable the world size came from; empty without a launcher
  bool distributed() const { return world_size > 1; }
};

// From a lookup (getenv or a test's map); a value that is not a number in range is an error
// naming the variable.
LaunchEnv launch_env_from(const std::function<const char*(const char*)>& lookup);
// From this process's environment.
LaunchEnv launch_env();

}  // namespace tessera::train::dist
