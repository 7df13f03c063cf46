#!/usr/bin/env bash
# Smoke run of examples/text/transformer.ini as it is (4 causal transformer
# blocks on byte windows of 128) on 2 ranks, on tiny settings: the first
# 9 KiB of the fortunes' text shard into 64 training windows and 7 held-out
# ones, one epoch of 8 steps. It checks that the declared network trains
# data-parallel on a token dataset, that loss per token and perplexity are
# reported, and that its model.h5 rebuilds the network (dlscale generate),
# not what it learns.
#   transformer_smoke_test.sh DLSCALE_BINARY SOURCE_DIR
set -euo pipefail
dlscale=$(realpath "$1") src=$(cd "$2" && pwd)
. "$src/tests/scratch.sh"
fortunes=/usr/share/games/fortunes/fortunes
[ -f "$fortunes" ] || { echo "$fortunes missing: install Debian's fortunes (.ci/install-deps)" >&2; exit 1; }
head -c 9300 "$fortunes" >text.txt
"$dlscale" shard --text text.txt --context 128 --output train --validation-fraction 0.1 --validation-output val \
  --shards 2 >shard.log
grep -q '"kind": "tokens"' train/index.json || { echo "train is not a token dataset" >&2; exit 1; }
mpirun -n 2 --oversubscribe "$dlscale" train "$src/examples/text/transformer.ini" \
  --train-data train --validation-data val --test-data val --max-epochs 1 --mini-batch-size 8 \
  --warmup-iterations 2 --validation-frequency 4 --verbose-frequency 4 --threads 1 --output run >train.log 2>&1 ||
  { cat train.log >&2; echo "dlscale train transformer.ini failed" >&2; exit 1; }
cat train.log
grep -q '"iterations": 8' run/summary.json || { cat run/summary.json >&2; echo "expected 8 iterations" >&2; exit 1; }
grep -q '"world_size": 2' run/summary.json || { echo "expected a 2-rank run" >&2; exit 1; }
grep -q '"validation_perplexity": [0-9]' run/summary.json || { echo "no validation perplexity" >&2; exit 1; }
grep -q '^test loss per token: [0-9.]*  perplexity: [0-9.]*' train.log || { echo "no test loss per token" >&2; exit 1; }
"$dlscale" generate --model run/model.h5 --prompt "Q: " --tokens 20 --seed 2 >sample.txt
[ "$(head -c 3 sample.txt)" = "Q: " ] && [ "$(wc -c <sample.txt)" -eq 24 ] ||
  { od -c sample.txt >&2; echo "expected the prompt, 20 bytes and a newline" >&2; exit 1; }
"$dlscale" generate --model run/model.h5 --prompt "Q: " --tokens 20 --seed 2 | cmp - sample.txt ||
  { echo "the same seed sampled different text" >&2; exit 1; }
