#!/usr/bin/env bash
# Start-up stress (issue 32; docs/reliability.md, the MPI_Init fence row): many
# two-node starts as submitted jobs start their ranks (srun --mpi=pmix, the
# job script's ring fence, 2 ranks per node), each running `dlscale info`,
# whose rank table is MPI_Init followed at once by the job's first messages
# across nodes: where a PMIx fence crash (docs/running.md) would strike. Every
# start must exit 0 and list 4 ranks on node1 and node2. Registered in the
# address lane's build only (tests/cluster/CMakeLists.txt), so a memory
# error of dlscale's own in start-up is reported, not just a crash.
#   startup_stress_test.sh CLUSTER_DIR DLSCALE [STARTS]
set -euo pipefail
. "$(dirname "$0")/cluster_env.sh" "$1" "$2"
starts=${3:-100}

begin=$SECONDS
for ((i = 1; i <= starts; ++i)); do
  out=$scratch/start-$i.txt
  if ! on_node node1 timeout 60 srun --mpi=pmix --kill-on-bad-exit=1 --nodes=2 --ntasks-per-node=2 \
    "$dlscale" info >"$out" 2>&1; then
    fail "start $i of $starts failed: $(tail -20 "$out")"
  fi
  [ "$(grep -cE '^ +[0-3] +node[12] ' "$out")" = 4 ] || fail "start $i of $starts listed not 4 ranks: $(cat "$out")"
  grep -q ' node2 ' "$out" || fail "start $i of $starts ran no rank on node2: $(cat "$out")"
  ! grep -q 'ERROR: AddressSanitizer\|runtime error:' "$out" || fail "start $i of $starts: a sanitizer report: $(cat "$out")"
done
echo "startup stress: $starts two-node starts (2 ranks per node) without a crash in $((SECONDS - begin)) s"
