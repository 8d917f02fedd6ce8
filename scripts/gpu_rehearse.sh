#!/usr/bin/env bash
# Rehearses, on this machine, what scripts/gpu_check.sh will do on a lent GPU machine that has the
# CUDA toolkit but none of Debian's development packages: packs the dependencies
# (scripts/gpu_deps.sh), lays out cuDNN and NCCL as pip's nvidia-* wheels do (versioned library
# names only, under site-packages/nvidia/*/), and then, in a private mount namespace where every
# file of the packed packages, of oneDNN's and Open MPI's development packages and the toolkit's
# own cuDNN/NCCL headers are hidden (empty), runs the GPU command's own steps
# `env build test` with CMake ignoring the system's prefixes. A dependency the pack lacks fails the
# configure, the build or the loading of a test program here, not on the GPU machine. Without a GPU
# the device tests report skipped; the library plan and descriptor tests run.
# Usage: scripts/gpu_rehearse.sh [OUT_DIR]   (default: build-gpu-rehearsal/out)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build-gpu-rehearsal/out}
bash scripts/gpu_deps.sh
export PATH="$PATH:/usr/local/cuda/bin"
toolkit=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")

# site-packages/nvidia/{cudnn,nccl}: lib/ with the versioned names only, include/ with the headers.
fake=$PWD/build-gpu-rehearsal/site-packages
rm -rf "$fake" && mkdir -p "$fake/nvidia"
for pkg in cudnn nccl; do
  mkdir -p "$fake/nvidia/$pkg/lib" "$fake/nvidia/$pkg/include"
  touch "$fake/nvidia/$pkg/__init__.py"
  for lib in "$toolkit"/lib*/lib"$pkg"*.so.*; do
    link=$fake/nvidia/$pkg/lib/$(basename "$lib")  # lib/ and lib64/ may be one folder
    [[ $lib =~ \.so\.[0-9]+$ ]] && [ ! -e "$link" ] && ln -s "$(readlink -f "$lib")" "$link"
  done
  cp "$toolkit"/include/"$pkg"*.h "$fake/nvidia/$pkg/include/"
done

# What a bare GPU machine lacks: the packed packages (zlib's runtime library aside, which this
# machine's own tools load), the CPU-side development packages the GPU build must not need, and the
# toolkit's copies of what pip's wheels provide.
hidden=()
for pkg in $(cat .gpu-deps/packages.txt) libdnnl-dev libopenmpi-dev; do
  [ "$pkg" = zlib1g ] || [ "$pkg" = dataset-fashion-mnist ] && continue
  while read -r f; do
    [ -f "$f" ] || [ -L "$f" ] && hidden+=("$f")
  done < <(dpkg -L "$pkg" 2>/dev/null)
done
for f in "$toolkit"/include/cudnn*.h "$toolkit"/include/nccl*.h /usr/local/include/cudnn*.h /usr/local/include/nccl*.h; do
  [ -e "$f" ] && hidden+=("$f")
done
printf '%s\n' "${hidden[@]}" > build-gpu-rehearsal/hidden.txt
echo "gpu_rehearse: hiding ${#hidden[@]} files (build-gpu-rehearsal/hidden.txt)"

# In the namespace every hidden regular file reads as empty, and so does a link to one. (A mount
# cannot cover a link itself, only what it points to: links are left alone, so that zlib's
# development link, say, does not take the runtime library this machine's tools load with it.)
# Root may make a mount namespace; anyone else, inside a user namespace of their own.
as_root=(); [ "$(id -u)" -eq 0 ] || as_root=(--map-root-user)
# The build step's 240 s are the lent machine's, with 16 cores: here the same work gets 16/cores
# times as long (2 cores: 1920 s), and the overall budget grows by as much. The GPU command
# compiles the host sources as a unity build (nvcc's kernels one by one, as CMake 3.25 builds CUDA)
# there as here.
build_seconds=$((240 * 16 / $(nproc)))
((build_seconds < 240)) && build_seconds=240
export GPU_CHECK_BUILD_SECONDS=$build_seconds GPU_CHECK_SECONDS=$((build_seconds + 270))
unshare "${as_root[@]}" --mount --propagation private bash -c '
  set -euo pipefail
  while read -r f; do
    [ -L "$f" ] || mount --bind /dev/null "$f"
  done < build-gpu-rehearsal/hidden.txt
  [ -s /usr/include/eigen3/Eigen/Core ] && { echo "gpu_rehearse: hiding failed" >&2; exit 1; }
  GPU_CHECK_PYTHON=python3 PYTHONPATH="'"$fake"'" GPU_CHECK_CMAKE_ARGS="-DCMAKE_SYSTEM_IGNORE_PREFIX_PATH=/usr;/" \
    GPU_CHECK_WORK="$PWD/build-gpu-rehearsal/work" bash scripts/gpu_check.sh "'"$out"'" env build test
'
