#!/usr/bin/env bash
# The example sweep parses and lays out its 4 trials (dry run: nothing
# trains); its job folder lands in a temporary HOME.
#   sweep_dry_run_test.sh DLSCALE_BINARY SOURCE_DIR
set -euo pipefail
dlscale=$(realpath "$1") src=$(cd "$2" && pwd)
. "$src/tests/scratch.sh"
export HOME=$scratch/home
"$dlscale" sweep "$src/examples/fashion-mnist/sweep.ini" --dry-run
trials=$(find "$HOME"/dlscale-jobs/*/trials -mindepth 1 -maxdepth 1 -type d | wc -l)
[ "$trials" -eq 4 ] || { echo "expected 4 trial folders, found $trials" >&2; exit 1; }
