#!/usr/bin/env bash
# Installs Tessera's build dependencies, and the default dataset (Fashion-MNIST, used by the main
# job and by the data tests), from Debian packages when they are missing. Open MPI
# (libopenmpi-dev, openmpi-bin) builds the data-parallel trainer and runs its `mpi` tests; a build
# without it still trains in one process (docs/distributed.md). python3-yaml (PyYAML) checks that a
# run's args.yaml loads as timm's does (tests/test_train_config.cpp). oneDNN (libdnnl-dev) does the
# float32 GEMMs and convolutions of the CPU backend (ops/cpu/gemm.cpp). clang-format-14 checks that
# every source follows .clang-format (scripts/check_format.sh).
# Usage: scripts/setup.sh [extra-package ...]
set -euo pipefail

packages=(g++ cmake ninja-build libeigen3-dev catch2 ccache libturbojpeg0-dev libjpeg62-turbo-dev libstb-dev zlib1g-dev libdeflate-dev libonnx-dev libprotobuf-dev python3-pip
          libdnnl-dev libopenmpi-dev openmpi-bin libyaml-cpp-dev python3-yaml dataset-fashion-mnist clang-format-14 "$@")
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
