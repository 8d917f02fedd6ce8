// The communicator of the 2-rank test job (tests/distributed/mpi_main.cpp).
#pragma once
#include <memory>

#include "tessera/train/distributed/communicator.h"

namespace tessera::testing {

std::shared_ptr<train::dist::Communicator>& world();

}  // namespace tessera::testing
