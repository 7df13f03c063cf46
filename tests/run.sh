#!/usr/bin/env bash
# Installs dependencies, builds dlscale and runs every test (what CI runs).
#   tests/run.sh [ctest arguments]
#   tests/run.sh --sanitize address|thread [ctest arguments]: a sanitizer
#     lane instead, in its own build folder (tests/sanitizers/lane.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
.ci/install-deps
if [ "${1:-}" = "--sanitize" ]; then
  shift
  exec tests/sanitizers/lane.sh "$@"
fi
.ci/build
cd build
ctest --output-on-failure -j "$(nproc)" "$@"
