#!/usr/bin/env bash
# GEMM libraries on Tessera's shapes (bench/gemm_libraries.cpp): Eigen, oneDNN, OpenBLAS (OpenMP
# build, PyTorch's BLAS on Debian) and libxsmm, GFLOP/s against the cores' FMA peak, as a markdown
# table. Installs what only this comparison needs. usage: scripts/bench_gemm_libraries.sh [THREADS]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh libopenblas0-openmp libxsmm-dev
out=${BUILD_DIR:-build-release}/gemm_libraries
mkdir -p "$(dirname "$out")"
g++ -std=c++20 -O3 -march=native -fopenmp -DEIGEN_DONT_PARALLELIZE -I. -I/usr/include/eigen3 bench/gemm_libraries.cpp \
  -o "$out" -ldnnl /usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.so.0 /usr/lib/libxsmm.a /usr/lib/libxsmmnoblas.a
threads=${1:-2}
source scripts/openblas_coretype.sh
OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads "$out" "$threads"
