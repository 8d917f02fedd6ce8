#!/usr/bin/env bash
# Sets up, builds and runs Tessera's main job. Until the trainer lands this is the autograd demo:
# an MLP fitted on a synthetic spiral dataset. Extra arguments go to the demo.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh build
./build/tessera_demo "$@"
