#!/usr/bin/env bash
# bench/step_profile writes what bench/scaling_model reads: a small MLP under
# mpirun -n 2 with two bucket sizes gives a profile with every layer in
# backward order, its bucket layouts and the all-reduce points, and the model
# prints one predicted-vs-measured row per bucket size. No timing is asserted.
#   step_profile_model_test.sh STEP_PROFILE SCALING_MODEL SOURCE_DIR
set -euo pipefail
profile=$1 model=$2 src=$3
. "$src/tests/scratch.sh"
mpirun -n 2 --oversubscribe --bind-to none "$profile" "$src/bench/models/mlp.ini" --batch 8 --reps 4 --rounds 2 \
  --buckets 0.5,25 --max-allreduce-mib 0.25 --output p.json > out.txt
/usr/bin/python3 - <<'PY'
import json
j = json.load(open("p.json"))
assert j["ranks"] == 2, j["ranks"]
assert (j["repetitions"], j["rounds"]) == (4, 2), (j["repetitions"], j["rounds"])
# 784-512-512-10 MLP: backward reports dense3, relu, dense2, relu, dense1.
names = [l["name"].split()[1] for l in j["layers"]]
assert names == ["dense", "relu", "dense", "relu", "dense"], names
grad = [l["grad_bytes"] for l in j["layers"]]
assert grad == [4 * (512 * 10 + 10), 0, 4 * (512 * 512 + 512), 0, 4 * (784 * 512 + 512)], grad
assert j["grad_bytes"] == sum(grad)
c = j["configurations"]
# The ladder 4 KiB x4 up to the maximum, and every bucket size measured.
sizes = [p["bytes"] for p in j["allreduce"]["blocking"]]
buckets = {b["bytes"] for x in c for b in x["buckets"]}
assert sizes == sorted({4096, 16384, 65536, 262144} | buckets), sizes
assert sizes == [p["bytes"] for p in j["allreduce"]["nonblocking"]]
assert [x["bucket_mib"] for x in c] == [0.5, 25]
# Planned per param in backward order (dense3 bias, weight, dense2 bias, weight, ...):
# with 0.5 MiB buckets dense2's bias joins dense3 while its 1 MiB weight and
# each of dense1's params get a bucket of their own; with 25 MiB the first
# bucket stops at 1 MiB and the rest share one.
assert [b["layers"] for b in c[0]["buckets"]] == [[0, 2], [2], [4], [4]], c[0]["buckets"]
assert [b["layers"] for b in c[1]["buckets"]] == [[0, 2], [2, 4]], c[1]["buckets"]
assert sum(b["bytes"] for b in c[1]["buckets"]) == j["grad_bytes"]
for x in c:
    assert x["step_s"] > 0 and x["allreduce_s"] > 0 and 0 <= x["hidden_share"] <= 1, x
PY
"$model" measured p.json > model.txt
cat model.txt
[ "$(grep -c '^| 2 | ' model.txt)" -eq 2 ] || { echo "expected one row per bucket size" >&2; exit 1; }
grep -q '^largest prediction error: ' model.txt
# CPU ranks progress their all-reduce by polling: predicted with every bucket
# after backward; the same profile marked async is predicted with the overlap
# recurrence, and the two predictions swap columns.
grep -q '^all-reduce progress: polled' model.txt
/usr/bin/python3 -c '
import json; j = json.load(open("p.json")); assert j["allreduce_progress"] == "polled"
j["allreduce_progress"] = "async"; json.dump(j, open("async.json", "w"))
j["allreduce_progress"] = "sometimes"; json.dump(j, open("unknown.json", "w"))'
"$model" measured async.json > async.txt
/usr/bin/python3 - <<'PY'
rows = lambda f: [l.split("|")[5:8] for l in open(f) if l.startswith("| 2 | ")]
assert len(rows("async.txt")) == len(rows("model.txt")) == 2
for polled, overlapped in zip(rows("model.txt"), rows("async.txt")):
    assert polled[0] == overlapped[2] and polled[2] == overlapped[0], (polled, overlapped)
PY
if "$model" measured unknown.json 2> err.txt; then echo "an unknown progress was accepted" >&2; exit 1; fi
grep -q 'unknown.json: allreduce_progress must be polled or async' err.txt || { cat err.txt >&2; exit 1; }
# A file that is not a profile is named in the error.
echo '{}' > bad.json
if "$model" measured bad.json 2> err.txt; then echo "a bad profile was accepted" >&2; exit 1; fi
grep -q 'bad.json' err.txt || { cat err.txt >&2; exit 1; }
# Rounds: at least one.
if mpirun -n 2 --oversubscribe --bind-to none "$profile" "$src/bench/models/mlp.ini" --rounds 0 2> err.txt > /dev/null; then
  echo "--rounds 0 was accepted" >&2; exit 1
fi
grep -q 'rounds' err.txt || { cat err.txt >&2; exit 1; }
# The example CNN: its batch-norm layers apply the relu after them (fused), so
# backward reports neither relu; the profile lists the layers it does report.
mpirun -n 2 --oversubscribe --bind-to none "$profile" "$src/examples/fashion-mnist/cnn.ini" --batch 8 --reps 2 \
  --buckets 25 --max-allreduce-mib 0.0625 --output cnn.json > cnn-out.txt
/usr/bin/python3 - <<'PY'
import json
names = [l["name"].split()[1] for l in json.load(open("cnn.json"))["layers"]]
assert names == ["dense", "dropout", "relu", "dense", "maxpool", "batchnorm", "conv2d",
                 "maxpool", "batchnorm", "conv2d"], names
PY
