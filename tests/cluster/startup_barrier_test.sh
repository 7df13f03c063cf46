#!/usr/bin/env bash
# MPI_Init waits for the ranks of every node when started as submitted jobs
# start them (srun --mpi=pmix with the job script's PMIx fence). Slurm
# 22.05's tree fence spans only the local node when TreeWidth exceeds the
# step's node count; ranks then left MPI_Init before other nodes joined, and
# their first message crashed a rank still inside it (docs/running.md).
#   startup_barrier_test.sh CLUSTER_DIR DLSCALE PROBE
set -euo pipefail
probe=$(realpath "$3")
. "$(dirname "$0")/cluster_env.sh" "$1" "$2"

# The fence a submitted job uses: the job script's own export line.
use_cluster_profile
job=$(submit_job "$project/examples/fashion-mnist/cnn.ini" --nodes 2 --tasks-per-node 2 --dry-run)
fence_line=$(grep '^export SLURM_PMIX_FENCE=' "$scratch/jobs/$job/job.sh") || fail "job.sh sets no PMIx fence"
unset SLURM_PMIX_FENCE
eval "$fence_line"
echo "job script: $fence_line -> SLURM_PMIX_FENCE=$SLURM_PMIX_FENCE"

# The last rank (on node2) reaches MPI_Init 3 s after the others.
delay=3
on_node node1 timeout 60 srun --mpi=pmix --kill-on-bad-exit=1 --nodes=2 --ntasks-per-node=2 \
  bash -c "[ \"\$SLURM_PROCID\" != 3 ] || sleep $delay; exec '$probe'" >probe.txt 2>&1 ||
  fail "the probe job failed: $(cat probe.txt)"
cat probe.txt
[ "$(grep -c '^rank ' probe.txt)" = 4 ] || fail "not every rank reported"
grep -q ' host node2 ' probe.txt || fail "no rank ran on node2"
python3 - probe.txt "$delay" <<'PY' || fail "a rank left MPI_Init before the last rank entered it"
import sys
ranks = [line.split() for line in open(sys.argv[1]) if line.startswith("rank ")]
entered = {int(r[1]): float(r[5]) for r in ranks}
left = {int(r[1]): float(r[7]) for r in ranks}
last_entry = max(entered.values())
assert last_entry - min(entered.values()) >= float(sys.argv[2]) - 0.5, "the delayed rank was not late"
early = {r: round(last_entry - t, 3) for r, t in left.items() if t < last_entry}
print("left MPI_Init before the last rank entered (s early):", early)
sys.exit(1 if early else 0)
PY
echo "startup barrier: every rank left MPI_Init after the last rank ($delay s late, on node2) entered it"
