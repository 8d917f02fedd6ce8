# Sourced by the benchmark scripts: sets OPENBLAS_CORETYPE, the kernels of PyTorch's BLAS, to the
# best ones this CPU runs. Debian's OpenBLAS 0.3.21 does not recognise recent CPUs (Sapphire
# Rapids, Zen 4/5 under KVM) and silently falls back to its SSE3 "Prescott" kernels, 3-4x slower;
# machines here also come with OPENBLAS_CORETYPE=Haswell in their environment, which halves
# PyTorch's GEMMs on an AVX-512 CPU (measured: 248 against 490 GFLOP/s on 2 Zen 5 cores). So an
# inherited value is not trusted; BENCH_OPENBLAS_CORETYPE chooses another on purpose.
if [[ -n "${BENCH_OPENBLAS_CORETYPE:-}" ]]; then export OPENBLAS_CORETYPE=$BENCH_OPENBLAS_CORETYPE
elif grep -qw avx512f /proc/cpuinfo; then export OPENBLAS_CORETYPE=SkylakeX
elif grep -qw avx2 /proc/cpuinfo; then export OPENBLAS_CORETYPE=Haswell
else unset OPENBLAS_CORETYPE
fi
