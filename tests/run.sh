#!/usr/bin/env bash
# Installs dependencies, builds dlscale and runs every test (what CI runs).
set -euo pipefail
cd "$(dirname "$0")/.."
.ci/install-deps
.ci/build
cd build
ctest --output-on-failure -j "$(nproc)" "$@"
