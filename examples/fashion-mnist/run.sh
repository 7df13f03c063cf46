#!/usr/bin/env bash
# The Fashion-MNIST demo from nothing: installs dependencies, builds dlscale,
# converts Debian's dataset-fashion-mnist to HDF5 shards and trains the CNN
# data-parallel over local ranks, printing the test accuracy.
#   examples/fashion-mnist/run.sh [cnn|mlp|resnet]     (DLSCALE_RANKS=N, default 2)
set -euo pipefail
cd "$(dirname "$0")/../.."
model=${1:-cnn}
ranks=${DLSCALE_RANKS:-2}
.ci/install-deps
.ci/build
src=/usr/share/datasets/fashion-mnist
# Sharded once; again when the shards predate their CRC-32 in index.json.
for split in train:train t10k:test; do
  name=${split%%:*} out=data/fashion-mnist/${split##*:}
  grep -qs '"crc32"' "$out/index.json" || build/launch/dlscale shard --images "$src/$name-images-idx3-ubyte.gz" \
    --labels "$src/$name-labels-idx1-ubyte.gz" --output "$out" --shards 4 --overwrite
done
if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
mpirun -n "$ranks" --oversubscribe build/launch/dlscale train "examples/fashion-mnist/$model.ini" \
  --output "runs/fashion-mnist-$model" "${@:2}"
