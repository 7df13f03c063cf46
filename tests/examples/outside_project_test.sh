#!/usr/bin/env bash
# Installs this build into a temporary prefix and builds examples/outside-project
# against it with find_package(dlscale): the installed package must work.
#   outside_project_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$(cd "$1" && pwd) build=$(cd "$2" && pwd)  # absolute: the test works from its own folder
. "$src/tests/scratch.sh"
prefix=$scratch/install-test outside=$scratch/outside-build
cmake --install "$build" --prefix "$prefix" >/dev/null
test -x "$prefix/bin/dlscale"
test -f "$prefix/include/layers/network.h"
test -f "$prefix/lib/cmake/dlscale/dlscaleConfig.cmake"
cmake -S "$src/examples/outside-project" -B "$outside" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$outside" -j 2 >/dev/null
test -x "$outside/custom_loop"
"$prefix/bin/dlscale" info | grep -q "dlscale 0.1.0"
echo "installed package builds an outside project"
