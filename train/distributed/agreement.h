// The start-of-run check of a data-parallel job: every rank must train the same model with the
// same settings, or the averaged gradients mean nothing (and differently shaped buckets would
// corrupt each other). A mismatch ends every rank with one message naming the difference.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "tessera/train/distributed/communicator.h"

namespace tessera::train::dist {

using Facts = std::vector<std::pair<std::string, std::string>>;  // (name, value), e.g. ("lr", "0.001")

// Compares this rank's facts with rank 0's. Throws the same Error on every rank when any rank
// differs: "ranks disagree: rank 1 has lr = 0.002 where rank 0 has lr = 0.001".
void check_agreement(Communicator& comm, const Facts& facts);

}  // namespace tessera::train::dist
