#!/usr/bin/env bash
# Smoke run of examples/fashion-mnist/resnet.ini as it is (ResNet-20 with
# projection shortcuts, global average pooling and augmentation) on 2 ranks,
# on tiny settings: the first 256 Fashion-MNIST test images for training,
# validation and testing, one epoch of 8 steps. It checks that the network
# the config declares trains data-parallel and that its model.h5 rebuilds
# the network (dlscale predict), not what it learns.
#   resnet_smoke_test.sh DLSCALE_BINARY SOURCE_DIR
set -euo pipefail
dlscale=$(realpath "$1") src=$(cd "$2" && pwd)
. "$src/tests/scratch.sh"
fmnist=/usr/share/datasets/fashion-mnist
n=256
# idx files of the first n samples: a header with the new count, then the bytes.
count=$(printf '\\x%02x\\x%02x\\x%02x\\x%02x' $((n >> 24 & 255)) $((n >> 16 & 255)) $((n >> 8 & 255)) $((n & 255)))
zcat "$fmnist/t10k-images-idx3-ubyte.gz" >all-images.idx
zcat "$fmnist/t10k-labels-idx1-ubyte.gz" >all-labels.idx
{ printf "\x00\x00\x08\x03$count\x00\x00\x00\x1c\x00\x00\x00\x1c"; head -c $((16 + n * 784)) all-images.idx | tail -c $((n * 784)); } >images.idx
{ printf "\x00\x00\x08\x01$count"; head -c $((8 + n)) all-labels.idx | tail -c "$n"; } >labels.idx
"$dlscale" shard --images images.idx --labels labels.idx --output data --shards 2 --num-classes 10 >/dev/null
mpirun -n 2 --oversubscribe "$dlscale" train "$src/examples/fashion-mnist/resnet.ini" \
  --train-data data --validation-data data --test-data data --max-epochs 1 --mini-batch-size 32 \
  --warmup-iterations 2 --validation-frequency 4 --verbose-frequency 4 --threads 1 --output run >train.log 2>&1 ||
  { cat train.log >&2; echo "dlscale train resnet.ini failed" >&2; exit 1; }
cat train.log
grep -q '"iterations": 8' run/summary.json || { cat run/summary.json >&2; echo "expected 8 iterations" >&2; exit 1; }
grep -q '"world_size": 2' run/summary.json || { echo "expected a 2-rank run" >&2; exit 1; }
grep -q 'augment-crop-padding = 4' run/config.ini || { echo "augmentation missing from config.ini" >&2; exit 1; }
"$dlscale" predict --model run/model.h5 --data data --output predictions.csv
[ "$(wc -l <predictions.csv)" -eq $((n + 1)) ] || { echo "expected $n predictions" >&2; exit 1; }
