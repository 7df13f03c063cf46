#!/usr/bin/env bash
# dlscale report on a real small run and a real small sweep, rendered by
# headless Chromium: the screenshot is a non-trivial PNG and the DOM Chromium
# built holds every plot's <svg> (and, where the run wrote telemetry, the
# per-rank lines).
#   report_render_test.sh DLSCALE_BINARY
set -euo pipefail
dlscale=$(realpath "$1")  # absolute: the test works from its own folder

browser=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$browser" ]; then
  echo "report_render_test: no chromium on PATH; install Debian's 'chromium' package (.ci/install-deps does)" >&2
  exit 1
fi
. "$(dirname "$0")/../scratch.sh"
work=$scratch
# Chromium keeps state under HOME too, and the sweep puts its jobs there.
export HOME=$work/home
mkdir -p "$HOME"

fail() {
  echo "report_render_test: $*" >&2
  exit 1
}

# 4 classes of 16 features: class c lights up features 4c..4c+3 (plus noise).
awk 'BEGIN { srand(7); for (i = 0; i < 800; i++) { c = i % 4; line = c;
       for (f = 0; f < 16; f++) line = line "," int(rand() * 60 + (int(f / 4) == c ? 180 : 0)); print line } }' >data.csv
"$dlscale" shard --csv data.csv --output data >/dev/null
cat >mlp.ini <<EOF
input = 16
layer = dense units=16
layer = relu
layer = dense units=4
layer = softmax
solver = adam
initial-learn-rate = 0.01
max-epochs = 3
mini-batch-size = 32
verbose-frequency = 5
validation-frequency = 10
train-data = $work/data
validation-data = $work/data
test-data = $work/data
EOF

# Chromium's own chatter (dbus, GPU) goes to a log, shown only on failure.
render() {  # render PAGE NAME: NAME.png and NAME.dom.html
  local url="file://$1" name=$2
  "$browser" --headless --disable-gpu --no-sandbox --user-data-dir="$work/chromium-profile" --hide-scrollbars \
    --window-size=1280,1700 --screenshot="$work/$name.png" "$url" >>"$work/chromium.log" 2>&1 ||
    { cat "$work/chromium.log" >&2; fail "chromium could not screenshot $1"; }
  "$browser" --headless --disable-gpu --no-sandbox --user-data-dir="$work/chromium-profile" \
    --dump-dom "$url" >"$work/$name.dom.html" 2>>"$work/chromium.log" ||
    { cat "$work/chromium.log" >&2; fail "chromium could not dump the DOM of $1"; }
  [ -f "$name.png" ] || fail "no screenshot $name.png"
  [ "$(head -c 8 "$name.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || fail "$name.png is not a PNG"
  local size
  size=$(stat -c %s "$name.png")
  [ "$size" -gt 20000 ] || fail "$name.png is only $size bytes: the page rendered (nearly) blank"
  echo "$name: screenshot $size bytes"
}

has_plot() {  # has_plot DOM ID [at least this many lines]
  local lines
  lines=$(awk -v id="<svg class=\"plot\" id=\"plot-$2\"" 'BEGIN { RS = "</svg>" }
          index($0, id) { print gsub(/<polyline class="series"/, "&") }' "$1")
  [ -n "$lines" ] || fail "$1 has no <svg> of plot $2"
  [ "$lines" -ge "${3:-0}" ] || fail "plot $2 in $1 has $lines lines, expected at least $3"
  echo "  plot-$2: $lines line(s)"
}

# One run.
"$dlscale" train mlp.ini --output run >train.log 2>&1 || { cat train.log >&2; fail "dlscale train failed"; }
"$dlscale" report run
render "$work/run/report.html" run
telemetry_lines=0
if [ -f run/telemetry.jsonl ]; then telemetry_lines=1; else echo "  (this build writes no telemetry.jsonl: per-rank plots say no data)"; fi
has_plot run.dom.html loss 2
has_plot run.dom.html accuracy 2
has_plot run.dom.html learn-rate 1
has_plot run.dom.html samples-per-second $telemetry_lines
has_plot run.dom.html utilization $telemetry_lines
[ "$(grep -o '<svg class="plot"' run.dom.html | wc -l)" -eq 5 ] || fail "run page: expected 5 plots"
grep -q 'test_accuracy' run.dom.html || fail "run page has no summary table"

# A sweep of two trials, run locally (jobs land in HOME/dlscale-jobs).
cat >sweep.ini <<EOF
base = mlp.ini
name = render
parallel = 1
grid.initial-learn-rate = 0.001, 0.01
grid.max-epochs = 2
EOF
"$dlscale" sweep sweep.ini >sweep.log 2>&1 || { cat sweep.log >&2; fail "dlscale sweep failed"; }
sweep_dir=$(ls -d "$work"/home/dlscale-jobs/render-*)
"$dlscale" report "$sweep_dir" --output "$work/sweep-report.html"
render "$work/sweep-report.html" sweep
has_plot sweep.dom.html sweep-loss 2
has_plot sweep.dom.html sweep-validation-accuracy 2
grep -q '<table id="results">' sweep.dom.html || fail "sweep page has no results table"
echo "report_render_test: ok"
