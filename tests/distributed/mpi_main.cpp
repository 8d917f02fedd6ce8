// main() of the tests that run as one rank of `mpirun -np 2`: joins the job's communicator,
// which the tests reach through world(), then runs the Catch2 session on every rank. The backend
// is TESSERA_TEST_DIST_BACKEND's ("mpi" by default; "nccl": tensors on cuda:<local rank>). A rank
// whose check fails exits non-zero, and so does mpirun; a rank left waiting on a failed peer
// ends at the communicator's deadline instead of hanging.
#include <cstdio>
#include <cstdlib>

#include "catch_session.h"
#include "mpi_world.h"

namespace tessera::testing {

std::shared_ptr<train::dist::Communicator>& world() {
  static std::shared_ptr<train::dist::Communicator> comm;
  return comm;
}

}  // namespace tessera::testing

int main(int argc, char** argv) {
  using namespace tessera;
  const train::dist::LaunchEnv env = train::dist::launch_env();
  if (env.world_size != 2) {
    std::fprintf(stderr, "this test runs as 2 ranks: mpirun --oversubscribe -np 2 %s\n", argv[0]);
    return 2;
  }
  train::dist::CommunicatorOptions options;
  const char* backend = std::getenv("TESSERA_TEST_DIST_BACKEND");
  options.backend = backend ? backend : "mpi";
  if (options.backend == "nccl") options.device = Device::cuda(env.local_rank);
  options.timeout_seconds = 120;
  testing::world() = train::dist::create_communicator(env, options);
  const int failed = testing::run_catch_session(argc, argv);
  testing::world()->barrier();
  testing::world().reset();
  return failed;
}
