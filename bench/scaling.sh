#!/usr/bin/env bash
# Data-parallel scaling on this machine, measured in one run:
#  - samples/s of the Fashion-MNIST CNN (one epoch, no validation) with
#    1 rank × 2 threads and with 2 ranks × 1 thread, and their ratio;
#  - bench/allreduce_bench under mpirun -n 2: our bucketed gradient
#    all-reduce against a plain MPI_Allreduce of the same bytes, and the
#    share of all-reduce time hidden behind backward.
#   bench/scaling.sh [config]      (default examples/fashion-mnist/cnn.ini)
set -euo pipefail
cd "$(dirname "$0")/.."
config=${1:-examples/fashion-mnist/cnn.ini}
bin=build/launch/dlscale
[ -x "$bin" ] || { echo "build dlscale first (.ci/build)" >&2; exit 1; }
[ -f data/fashion-mnist/train/index.json ] || { echo "shard the data first (examples/fashion-mnist/run.sh)" >&2; exit 1; }
if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
sps() { /usr/bin/python3 -c "import json,sys; print(round(json.load(open(sys.argv[1]))['samples_per_second'],1))" "$1/summary.json"; }
common=(--max-epochs 1 --validation-data "" --test-data "" --verbose false)
"$bin" train "$config" "${common[@]}" --threads 2 --output "$out/one" >/dev/null
mpirun -n 2 --bind-to core "$bin" train "$config" "${common[@]}" --threads 1 --output "$out/two" >/dev/null
one=$(sps "$out/one") two=$(sps "$out/two")
printf '%-28s %12s\n' "run" "samples/s"
printf '%-28s %12s\n' "1 rank x 2 threads" "$one"
printf '%-28s %12s\n' "2 ranks x 1 thread" "$two"
printf '%-28s %12s\n' "ratio 2x1 / 1x2" "$(/usr/bin/python3 -c "print(f'{$two/$one:.2f}')")"
echo
mpirun -n 2 --bind-to core build/bench/allreduce_bench "$config" 100 64
