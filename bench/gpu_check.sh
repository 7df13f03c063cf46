#!/usr/bin/env bash
# GPU checks for a lent GPU machine (run through the device tool): builds with
# CUDA, runs every GPU test and prints a short table last. Results go under
# $OUT (default ./gpu-check-out). Today it covers what exists on the GPU side:
# the CUDA build, device discovery and the NCCL all-reduce path; the CUDA
# layer kernels, GPU training and the PyTorch comparison arrive with the GPU
# backend issue and belong here then.
#   bench/gpu_check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-check-out}
mkdir -p "$out"
if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
status() { [ "$1" -eq 0 ] && echo ok || echo "FAILED ($1)"; }

start=$(date +%s)
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DDLSCALE_CUDA=ON >"$out/configure.log" 2>&1
configure=$?
cmake --build build-gpu -j "$(nproc)" >"$out/build.log" 2>&1
build=$?
build-gpu/launch/dlscale info >"$out/info.txt" 2>&1
info=$?
(cd build-gpu && ctest -R "nccl|execution|gradient_buckets" --output-on-failure) >"$out/gpu-tests.log" 2>&1
tests=$?
nvidia-smi >"$out/nvidia-smi.txt" 2>&1 || true

printf '\n%-28s %s\n' "check" "result"
printf '%-28s %s\n' "configure (DLSCALE_CUDA=ON)" "$(status $configure)"
printf '%-28s %s\n' "build" "$(status $build)"
printf '%-28s %s\n' "dlscale info" "$(status $info): $(grep -o '[0-9]* GPU(s)[^)]*' "$out/info.txt" | head -1)"
printf '%-28s %s\n' "GPU tests (NCCL all-reduce)" "$(status $tests): $(grep -Eo '[0-9]+% tests passed.*' "$out/gpu-tests.log" | head -1)"
printf '%-28s %s\n' "skipped" "$(grep -c 'Skipped' "$out/gpu-tests.log")"
printf '%-28s %ss\n' "wall time" "$(( $(date +%s) - start ))"
