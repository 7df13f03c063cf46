#!/usr/bin/env bash
# Training throughput of dlscale against PyTorch (Debian's python3-torch) on
# one epoch of Fashion-MNIST: same network, batch 128, Adam, float32, same
# number of CPU threads, measured in the same run. Prints samples/s and the ratio.
#   bench/train_throughput.sh [cnn|mlp] [threads]
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:-cnn} threads=${2:-2}
bin=build/launch/dlscale
[ -x "$bin" ] || { echo "build dlscale first (.ci/build)" >&2; exit 1; }
[ -f data/fashion-mnist/train/index.json ] || { echo "shard the data first (examples/fashion-mnist/run.sh)" >&2; exit 1; }
python3=/usr/bin/python3
"$python3" -c "import torch" 2>/dev/null || { echo "needs python3-torch (apt-get install python3-torch)" >&2; exit 1; }
if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$bin" train "examples/fashion-mnist/$model.ini" --max-epochs 1 --validation-data "" --test-data "" \
  --solver adam --learn-rate-schedule none --verbose false --threads "$threads" --output "$out/run" >/dev/null
ours=$("$python3" -c "import json,sys; print(round(json.load(open(sys.argv[1]))['samples_per_second'],1))" "$out/run/summary.json")
theirs=$("$python3" bench/pytorch_cnn.py --model "$model" --threads "$threads")
ratio=$("$python3" -c "print(f'{$ours/$theirs:.2f}')")
printf '%-8s %-8s %14s %14s %8s\n' model threads dlscale_sps pytorch_sps ratio
printf '%-8s %-8s %14s %14s %8s\n' "$model" "$threads" "$ours" "$theirs" "$ratio"
