#!/usr/bin/env bash
# Sweeps and reports on token data (issue #18 item 6): a local sweep of
# examples/text/transformer.ini over two learning rates, ranked by
# validation loss per token, on a token dataset cut from the fortunes (64
# training windows, 7 held out, 8 steps per trial, one trial at a time);
# then dlscale report on the sweep folder and on one trial's run.
#   transformer_sweep_test.sh DLSCALE_BINARY SOURCE_DIR
set -euo pipefail
dlscale=$(realpath "$1") src=$(cd "$2" && pwd)
. "$src/tests/scratch.sh"
export HOME=$scratch/home
fail() { echo "FAIL: $*" >&2; exit 1; }
fortunes=/usr/share/games/fortunes/fortunes
[ -f "$fortunes" ] || fail "$fortunes missing: install Debian's fortunes (.ci/install-deps)"
head -c 9300 "$fortunes" >text.txt
"$dlscale" shard --text text.txt --context 128 --output train --validation-fraction 0.1 --validation-output val \
  --shards 2 >shard.log
# The example's own network, on this data, with tiny settings.
sed -e "s#^train-data = .*#train-data = $scratch/train#" -e "s#^validation-data = .*#validation-data = $scratch/val#" \
  -e "s#^test-data = .*#test-data = $scratch/val#" "$src/examples/text/transformer.ini" >transformer.ini
grep -q "^train-data = $scratch/train" transformer.ini || fail "transformer.ini has no train-data line to replace"
cat >sweep.ini <<INI
base = transformer.ini
name = text-lr
metric = validation_loss
parallel = 1
threads-per-trial = 1
grid.initial-learn-rate = 0.0003, 0.003
grid.max-epochs = 1
grid.mini-batch-size = 8
grid.warmup-iterations = 2
grid.validation-frequency = 4
INI
"$dlscale" sweep sweep.ini >sweep.log 2>&1 || { cat sweep.log >&2; fail "dlscale sweep failed"; }
cat sweep.log
job=$(find "$HOME/dlscale-jobs" -mindepth 1 -maxdepth 1 -type d -name 'text-lr-*')
[ -n "$job" ] || fail "no sweep job folder in $HOME/dlscale-jobs"
# Both trials trained on token data and report loss per token and perplexity.
for t in 0 1; do
  summary=$job/trials/$t/run/summary.json
  [ -f "$summary" ] || fail "trial $t has no summary.json: $(tail -n 20 "$job/trials/$t/log.txt")"
  grep -q '"validation_perplexity": [0-9]' "$summary" || fail "trial $t: no validation perplexity in $summary"
done
# results.csv: a header and both trials, ranked by validation loss (lowest first).
python3 - "$job/results.csv" <<'PY' || fail "results.csv is not two finished trials ranked by validation_loss: $(cat "$job/results.csv")"
import csv, math, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert len(rows) == 2, rows
losses = [float(r["validation_loss"]) for r in rows]
assert all(math.isfinite(l) and l > 0 for l in losses), losses
assert losses[0] <= losses[1], losses
PY
# Reports: the sweep's overlays both trials; one run's shows its curves.
"$dlscale" report "$job" --output sweep.html >report.log 2>&1 || { cat report.log >&2; fail "dlscale report on the sweep failed"; }
for t in 0 1; do grep -q "trials/$t\|trial $t" sweep.html || fail "the sweep report does not show trial $t"; done
"$dlscale" report "$job/trials/0/run" >report-run.log 2>&1 || { cat report-run.log >&2; fail "dlscale report on a trial's run failed"; }
[ -s "$job/trials/0/run/report.html" ] || fail "no report.html in trial 0's run"
echo "sweep on token data: $(head -n 1 "$job/results.csv"); reports written"
