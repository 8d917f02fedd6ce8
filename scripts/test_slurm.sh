#!/usr/bin/env bash
# The Slurm launch docs/distributed.md describes, run for real: a one-node Slurm cluster on this
# machine (munged, slurmctld and slurmd with a slurm.conf of their own in a temporary folder, on
# ports 16817/16818), then `srun -n 2 --mpi=pmix tessera train ...` and the same run under
# `mpirun -np 2`; the two must end with the same weights, bit for bit. The ranks learn their place
# from PMIx (Open MPI's MPI_Init) and Tessera's launch environment from Slurm's variables
# (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_STEP_TASKS_PER_NODE: train/distributed/env.h).
# Needs root (the daemons), Debian's slurmctld, slurmd, slurm-client and munge (scripts/setup.sh
# installs them when given), and a build with MPI.
# Usage: scripts/test_slurm.sh [build-dir]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
tessera=$PWD/${1:-build}/bin/tessera
[ -x "$tessera" ] || { echo "test_slurm: $tessera not found (build first: scripts/build.sh)" >&2; exit 1; }
"$tessera" --version | grep -q "backends: .*mpi" || { echo "test_slurm: $tessera was built without MPI" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || { echo "test_slurm: the Slurm daemons need root" >&2; exit 1; }
for tool in munged slurmctld slurmd srun; do
  command -v "$tool" >/dev/null || { echo "test_slurm: $tool not found: bash scripts/setup.sh slurmctld slurmd slurm-client munge" >&2; exit 1; }
done

dir=$(mktemp -d /tmp/tessera-slurm.XXXXXX)
chmod 755 "$dir"
stop() {
  local pid
  for file in "$dir"/slurmd.pid "$dir"/slurmctld.pid "$dir"/munge/pid; do
    [ -s "$file" ] || continue
    pid=$(cat "$file")
    kill "$pid" 2>/dev/null || continue
    # The daemons are not our children: follow each until it is gone (slurmctld writes its state
    # on the way out), then remove the folder.
    timeout 30 tail --pid="$pid" -s 0.1 -f /dev/null
  done
  rm -rf "$dir"
}
trap stop EXIT

# munged with a socket of its own, as the munge user (it refuses to run as root).
mkdir -p "$dir/munge" "$dir/state" "$dir/spool"
chown munge:munge "$dir/munge" && chmod 755 "$dir/munge"  # clients reach the socket through it
runuser -u munge -- munged --socket="$dir/munge/socket" --pid-file="$dir/munge/pid" \
  --log-file="$dir/munge/log" --seed-file="$dir/munge/seed"

# This machine as the only node, as slurmd itself describes it (CPUs, cores, memory).
export SLURM_CONF=$dir/slurm.conf
cat > "$SLURM_CONF" <<EOF
ClusterName=tessera-ci
SlurmctldHost=$(hostname -s)(127.0.0.1)
SlurmctldPort=16817
SlurmdPort=16818
SlurmUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=pmix
ReturnToService=2
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
$(slurmd -C | head -1) NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=local Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
slurmctld -i
slurmd
for _ in $(seq 150); do  # the node registers within a few seconds
  [ "$(sinfo -h -o %T 2>/dev/null)" = idle ] && break
  sleep 0.2
done
[ "$(sinfo -h -o %T 2>/dev/null)" = idle ] || { sinfo; tail -n 20 "$dir"/slurm*.log; exit 1; }

# The run of the mpirun equivalence test in tests/distributed/cli_faults.sh's size: coat_lite_tiny,
# 32x32, 4 batches of 8 per rank; no --threads, so each rank's thread count comes from the launch.
flags=(train --model coat_lite_tiny --img-size 32 -b 8 --max-train-batches 4 --max-eval-batches 1 --primary none
       --crop-pct 1 --workers 1 --warmup-epochs 0 --epochs 1 --log-interval 1000)
export OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
timeout 300 srun -n 2 --mpi=pmix "$tessera" "${flags[@]}" --output "$dir/srun" > "$dir/srun.log" 2>&1 ||
  { cat "$dir/srun.log"; echo "test_slurm: srun failed" >&2; exit 1; }
timeout 300 mpirun -np 2 --oversubscribe "$tessera" "${flags[@]}" --output "$dir/mpirun" > "$dir/mpirun.log" 2>&1 ||
  { cat "$dir/mpirun.log"; echo "test_slurm: mpirun failed" >&2; exit 1; }
tail -n 3 "$dir/srun.log"
grep -q "2 ranks (mpi)" "$dir/srun.log" || { echo "test_slurm: srun did not start one job of 2 ranks" >&2; exit 1; }

# The same tensors, bit for bit: the header (checkpoint_id aside, random per save) and the data.
tensors() {  # the safetensors header without its checkpoint id, then a digest of the data
  local n
  n=$(od -An -tu8 -N8 "$1" | tr -d ' ')
  head -c $((n + 8)) "$1" | tail -c "$n" | sed 's/"checkpoint_id":"[0-9a-f]*",//'
  echo
  tail -c +$((n + 9)) "$1" | sha256sum
}
if ! diff <(tensors "$dir/srun/last.safetensors") <(tensors "$dir/mpirun/last.safetensors") >/dev/null; then
  echo "test_slurm: srun -n 2 and mpirun -np 2 ended with different weights" >&2
  exit 1
fi
echo "test_slurm: srun -n 2 (PMIx) on a one-node Slurm ends with mpirun -np 2's weights, bit for bit"

# The nccl communicator the same way, where the build has it (the emulator build: two emulated
# GPUs, cuda:0 and cuda:1, one per rank, NCCL's reference between them).
if "$tessera" --version | grep -q "backends: .*nccl" && "$tessera" --version | grep -q "emulator"; then
  export TESSERA_EMU_DEVICES=2
  nccl=("${flags[@]}" --device cuda --dist-backend nccl --max-train-batches 2)
  timeout 300 srun -n 2 --mpi=pmix "$tessera" "${nccl[@]}" --output "$dir/srun-nccl" > "$dir/srun-nccl.log" 2>&1 ||
    { cat "$dir/srun-nccl.log"; echo "test_slurm: srun with nccl failed" >&2; exit 1; }
  timeout 300 mpirun -np 2 --oversubscribe "$tessera" "${nccl[@]}" --output "$dir/mpirun-nccl" > "$dir/mpirun-nccl.log" 2>&1 ||
    { cat "$dir/mpirun-nccl.log"; echo "test_slurm: mpirun with nccl failed" >&2; exit 1; }
  grep -q "2 ranks (nccl)" "$dir/srun-nccl.log" || { echo "test_slurm: srun did not start 2 nccl ranks" >&2; exit 1; }
  if ! diff <(tensors "$dir/srun-nccl/last.safetensors") <(tensors "$dir/mpirun-nccl/last.safetensors") >/dev/null; then
    echo "test_slurm: srun -n 2 and mpirun -np 2 with nccl ended with different weights" >&2
    exit 1
  fi
  echo "test_slurm: the same with --dist-backend nccl on two emulated GPUs, bit for bit"
fi
