# The CMake options of the GPU check's build (scripts/gpu_check.sh), sourced by it and by
# scripts/gpu_deps.sh, which configures with the same options to learn what to pack. oneDNN and MPI
# are CPU-side and switched off on purpose: a bare GPU machine has neither, and the check needs
# neither (the NCCL run is a job of one rank).
gpu_build_options=(-DCMAKE_BUILD_TYPE=Release -DTESSERA_NATIVE=ON -DTESSERA_CUDA=ON -DTESSERA_ONEDNN=OFF -DTESSERA_MPI=OFF)
