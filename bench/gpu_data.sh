#!/usr/bin/env bash
# The data of bench/gpu_check.sh: Fashion-MNIST (the idx files PyTorch reads
# and the dlscale shards made from them, so both train on the same data) and
# the fortunes' text for the transformer.
#   bench/gpu_data.sh stage            here, before a device run: copy Debian's
#                                      dataset-fashion-mnist and the fortunes' plain text
#                                      (fortunes.txt) into data/fashion-mnist-idx (32 MB,
#                                      ignored through data/), the folder the device call
#                                      carries: the lent machine has neither the Debian
#                                      packages nor a network to fetch them
#   bench/gpu_data.sh DLSCALE DIR      shard the idx files into DIR/train and DIR/test with
#                                      the dlscale binary DLSCALE; first writes DIR/idx (the
#                                      idx folder used) and DIR/source (one line: real or synthetic);
#                                      with the staged fortunes.txt, also DIR/text-train and
#                                      DIR/text-val (byte windows of 128, the last 10% held out)
# The idx files are the first complete set of: $FASHION_MNIST, Debian's
# /usr/share/datasets/fashion-mnist, the carried data/fashion-mnist-idx; else
# bench/synthetic_idx.py makes synthetic files of the same shape in DIR/idx-synthetic
# (with $PYTHON, default python3: it needs numpy).
set -euo pipefail
cd "$(dirname "$0")/.."
debian=/usr/share/datasets/fashion-mnist
carried=data/fashion-mnist-idx
files=(train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz)
complete() { local f; for f in "${files[@]}"; do [ -s "$1/$f" ] || return 1; done; }

if [ "${1:-}" = stage ]; then
  complete "$debian" || { echo "gpu_data.sh stage needs dataset-fashion-mnist (apt-get install dataset-fashion-mnist)" >&2; exit 1; }
  mkdir -p "$carried"
  for f in "${files[@]}"; do cp "$debian/$f" "$carried/"; done
  # The fortunes' plain-text files, concatenated in examples/text/run.sh's order, for the transformer.
  text=()
  for f in /usr/share/games/fortunes/*; do
    case "$f" in *.dat | *.u8) ;; *) [ -f "$f" ] && text+=("$f") ;; esac
  done
  [ ${#text[@]} -gt 0 ] || { echo "gpu_data.sh stage needs fortunes (apt-get install fortunes)" >&2; exit 1; }
  cat "${text[@]}" >"$carried/fortunes.txt"
  echo "staged $(du -sh "$carried" | cut -f1) in $carried: carry [\"$carried\"] in the device call"
  exit 0
fi
[ $# -eq 2 ] || { echo "usage: bench/gpu_data.sh stage | bench/gpu_data.sh DLSCALE DIR" >&2; exit 2; }
dlscale=$1 dir=$2
mkdir -p "$dir"
idx="" source=""
for candidate in "${FASHION_MNIST:-}" "$debian" "$carried"; do
  if [ -n "$candidate" ] && complete "$candidate"; then idx=$candidate source="real Fashion-MNIST ($candidate)"; break; fi
done
if [ -z "$idx" ]; then
  idx=$dir/idx-synthetic source="synthetic (no Fashion-MNIST found; accuracy not comparable)"
  complete "$idx" || "${PYTHON:-python3}" bench/synthetic_idx.py "$idx"
fi
# Written before sharding, so PyTorch can still use the data when the dlscale build failed.
echo "$idx" >"$dir/idx"
echo "$source" >"$dir/source"
echo "data: $source"
# Sharded afresh each time: a few seconds, and the shards can never be from another source.
for split in train:train t10k:test; do
  "$dlscale" shard --images "$idx/${split%%:*}-images-idx3-ubyte.gz" --labels "$idx/${split%%:*}-labels-idx1-ubyte.gz" \
    --output "$dir/${split##*:}" --shards 4 --overwrite
done
if [ -s "$carried/fortunes.txt" ]; then
  "$dlscale" shard --text "$carried/fortunes.txt" --context 128 --output "$dir/text-train" \
    --validation-fraction 0.1 --validation-output "$dir/text-val" --shards 4 --overwrite
fi
