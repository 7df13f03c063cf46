#!/usr/bin/env bash
# A slow link is named (issue #31, item 3): one rank on each of node1, node2
# and node3 trains the Fashion-MNIST CNN while node2's link is limited with
# tc tbf (both ends; LINK_RATE, 100mbit by default). Every rank waits in the
# gradient all-reduce alike, so no rank computes longer than the others; the
# telemetry's link probes name node2 with what its link costs each step, in
# the log, telemetry.jsonl and summary.json, and name neither node1 nor node3.
#   link_straggler_test.sh CLUSTER_DIR DLSCALE
set -euo pipefail
. "$(dirname "$0")/cluster_env.sh" "$@"
fashion_mnist
sed -i 's/^max-epochs = .*/max-epochs = 1/' cnn.ini
rate=${LINK_RATE:-100mbit}
restore() { "$cluster_script" link "$cluster" node2 none || echo "could not take the limit off node2's link" >&2; }
trap restore EXIT
"$cluster_script" link "$cluster" node2 "$rate"

on_node node1 srun --mpi=pmix --nodes=3 --ntasks-per-node=1 --nodelist=node1,node2,node3 \
  "$dlscale" train cnn.ini --threads 1 --validation-data "" --output run >train.txt 2>&1 ||
  fail "training failed: $(tail -n 20 train.txt)"

grep "link straggler:" run/log.txt >named.txt || fail "no link straggler named in the log: $(grep -v '^|' run/log.txt | tail -n 20)"
grep -q "^dlscale: link straggler: rank 1 (node2): its link costs the job .* ms of each .* ms step" named.txt ||
  fail "the log names another link straggler than node2's rank 1: $(cat named.txt)"
! grep "link straggler:" named.txt | grep -q "(node[13])" || fail "node1 or node3 was named: $(cat named.txt)"
python3 - run/summary.json run/telemetry.jsonl <<'PY' || fail "summary.json or telemetry.jsonl do not name node2"
import json, sys
s = json.load(open(sys.argv[1]))["link_stragglers"]
assert s and all(x["host"] == "node2" and x["ranks"] == [1] for x in s), s
assert max(x["share_of_step"] for x in s) > 0.1, s
lines = [json.loads(l) for l in open(sys.argv[2])]
probes = [l["links"] for l in lines if "links" in l]
assert probes, "no line has the link probes"
slow = [l for l in lines if any(x["host"] == "node2" for x in l.get("link_stragglers", []))]
assert slow, "no telemetry line names node2"
n2 = [max(x["upload_s"], x["download_s"]) for p in probes for x in p if x["host"] == "node2"]
n3 = [max(x["upload_s"], x["download_s"]) for p in probes for x in p if x["host"] == "node3"]
print("summary.json link_stragglers:", [(x["host"], x["ranks"], round(x["share_of_step"], 2)) for x in s],
      "; median probe node2 %.1f ms, node3 %.1f ms" % (sorted(n2)[len(n2) // 2] * 1e3, sorted(n3)[len(n3) // 2] * 1e3))
PY
"$dlscale" monitor run --once >monitor.txt 2>&1 || true
grep -q "link straggler: rank 1 (node2)" monitor.txt || fail "dlscale monitor does not show node2's link: $(cat monitor.txt)"
head -n 1 named.txt
