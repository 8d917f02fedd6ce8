# The CMake options of the GPU check's build (scripts/gpu_check.sh), sourced by it and by
# scripts/gpu_deps.sh, which configures with the same options to learn what to pack. oneDNN and MPI
# are CPU-side and switched off on purpose: a bare GPU machine has neither, and the check needs
# neither (the NCCL run is a job of one rank). The ONNX exporter is off too: its libraries (onnx,
# protobuf) would take 11 MiB of the 64 MiB a GPU call carries, for a command the check never runs.
gpu_build_options=(-DCMAKE_BUILD_TYPE=Release -DTESSERA_NATIVE=ON -DTESSERA_CUDA=ON -DTESSERA_ONEDNN=OFF -DTESSERA_MPI=OFF -DTESSERA_ONNX=OFF)
