#!/usr/bin/env bash
# A slowed node is named a straggler (issue #15, item 5): 2 ranks on each of
# two nodes train the Fashion-MNIST CNN while node2's CPUs are taken away
# half of the time (its ranks are stopped 40 ms of every 80 ms, as a node
# whose cores another job shares). The log, summary.json and dlscale monitor
# name node2 (or its ranks), with the share of each step the job waits for
# it; node1's ranks are not named.
#   straggler_test.sh CLUSTER_DIR DLSCALE
set -euo pipefail
. "$(dirname "$0")/cluster_env.sh" "$@"
fashion_mnist
sed -i 's/^max-epochs = .*/max-epochs = 1/' cnn.ini

on_node node1 srun --mpi=pmix --nodes=2 --ntasks-per-node=2 --nodelist=node1,node2 \
  "$dlscale" train cnn.ini --threads 1 --validation-data "" --output run >train.txt 2>&1 &
train=$!
# The slowing: node2's training ranks.
pids=""
for ((i = 0; i < 600 && $(wc -w <<<"$pids") < 2; i++)); do pids=$(node_pids node2 "$dlscale train"); sleep 0.1; done
[ "$(wc -w <<<"$pids")" -eq 2 ] || fail "node2's two ranks did not start: $(cat train.txt)"
while kill -0 "$train" 2>/dev/null; do
  kill -STOP $pids 2>/dev/null || true
  sleep 0.04
  kill -CONT $pids 2>/dev/null || true
  sleep 0.04
done
kill -CONT $pids 2>/dev/null || true
wait "$train" || fail "training failed: $(tail -n 20 train.txt)"

grep "straggler" run/log.txt >named.txt || fail "nothing named a straggler in the log: $(grep -v '^|' run/log.txt | tail -n 20)"
grep -q "node2" named.txt || fail "the log names a straggler, not node2: $(cat named.txt)"
! grep "straggler:" named.txt | grep -q "(node1)" || fail "node1's ranks were named: $(cat named.txt)"
python3 - run/summary.json <<'PY' || fail "summary.json: $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["stragglers"])' run/summary.json)"
import json, sys
s = json.load(open(sys.argv[1]))["stragglers"]
assert s and all(x["host"] == "node2" for x in s), s
assert max(x["share_of_step"] for x in s) > 0.1, s
print("summary.json stragglers:", [(x["rank"], x["host"], x["whole_node"], round(x["share_of_step"], 2)) for x in s])
PY
"$dlscale" monitor run --once >monitor.txt 2>&1 || true
grep -q "node2" monitor.txt || fail "dlscale monitor does not show node2: $(cat monitor.txt)"
head -n 1 named.txt
