#!/usr/bin/env bash
# Smoke run of examples/custom_loop on real Fashion-MNIST data (the 10k test
# split, used for both training and testing: this checks the loop runs and
# learns, not generalization).
#   custom_loop_test.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)  # absolute: the test works from its own folder
src=/usr/share/datasets/fashion-mnist
. "$(dirname "$0")/../scratch.sh"
data=$scratch/custom-loop-data
"$build/launch/dlscale" shard --images "$src/t10k-images-idx3-ubyte.gz" --labels "$src/t10k-labels-idx1-ubyte.gz" \
  --output "$data" --shards 2 >/dev/null
out=$("$build/examples/custom_loop" "$data" "$data" 2)
echo "$out"
accuracy=$(echo "$out" | tail -1 | awk '{print $NF}')
awk -v a="$accuracy" 'BEGIN { exit !(a > 0.75) }' || { echo "accuracy $accuracy is not above 0.75" >&2; exit 1; }
