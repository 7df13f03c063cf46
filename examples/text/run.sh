#!/usr/bin/env bash
# The text demo from nothing: installs dependencies (Debian's fortunes among
# them), builds dlscale, shards the fortunes' plain-text files into byte
# windows of 128 (the last 10% held out for validation), trains
# examples/text/transformer.ini data-parallel over local ranks and prints a
# sample from the trained model.
#   examples/text/run.sh [train options...]     (DLSCALE_RANKS=N, default 2)
set -euo pipefail
cd "$(dirname "$0")/../.."
ranks=${DLSCALE_RANKS:-2}
.ci/install-deps
.ci/build
# The plain-text files (each has a .dat index and a .u8 link beside it).
files=()
for f in /usr/share/games/fortunes/*; do
  case "$f" in *.dat | *.u8) ;; *) [ -f "$f" ] && files+=("$f") ;; esac
done
grep -qs '"tokens"' data/text/train/index.json ||
  build/launch/dlscale shard --text "${files[@]}" --context 128 --output data/text/train \
    --validation-fraction 0.1 --validation-output data/text/val --shards 4 --overwrite
if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
mpirun -n "$ranks" --oversubscribe build/launch/dlscale train examples/text/transformer.ini \
  --output runs/text-transformer "$@"
build/launch/dlscale generate --model runs/text-transformer/model.h5 --prompt "The " --tokens 400 \
  --temperature 0.8 --seed 1
