#!/usr/bin/env bash
# The cost of the shard CRC-32 check on the Fashion-MNIST shards, as a ratio
# against a plain read() of the same files (docs/data-format.md, "Integrity").
# Shards Debian's dataset-fashion-mnist into data/fashion-mnist if needed
# (again when the shards predate checksums), builds shard_verify_bench.
#   bench/shard_verify.sh          DLSCALE_BUILD (build), REPEATS (5)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${DLSCALE_BUILD:-build}
src=/usr/share/datasets/fashion-mnist
data=data/fashion-mnist
[ -f "$src/train-images-idx3-ubyte.gz" ] || { echo "needs dataset-fashion-mnist (apt-get install dataset-fashion-mnist)" >&2; exit 1; }
if [ ! -x "$build/bench/shard_verify_bench" ] || [ ! -x "$build/launch/dlscale" ]; then
  [ -f "$build/CMakeCache.txt" ] || cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$build" -j"$(nproc)" --target dlscale shard_verify_bench >/dev/null
fi
for split in train:train t10k:test; do
  name=${split%%:*} out=$data/${split##*:}
  grep -qs '"crc32"' "$out/index.json" || "$build/launch/dlscale" shard --images "$src/$name-images-idx3-ubyte.gz" \
    --labels "$src/$name-labels-idx1-ubyte.gz" --output "$out" --shards 4 --overwrite >/dev/null
done
echo "load $(cut -d' ' -f1 /proc/loadavg) at the start"
for split in train test; do "$build/bench/shard_verify_bench" "$data/$split" "${REPEATS:-5}"; done
