#!/usr/bin/env bash
# GPU checks for a lent GPU machine (run through the device tool): builds with
# CUDA (only the targets below), runs device discovery, the NCCL all-reduce
# path, the caching allocator and every CUDA layer against its CPU layer
# (tests/gpu), and prints a short table last. Logs go under $OUT (default
# ./gpu-check-out). Sized for 16 cores: about 3 minutes of build, well
# under the 8 minutes a lent machine allows. GPU training and the PyTorch
# comparison need the trainer to use the CUDA layers; their rows say so.
#   bench/gpu_check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-check-out}
mkdir -p "$out"
if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
status() { [ "$1" -eq 0 ] && echo ok || echo "FAILED ($1)"; }
jobs=$(nproc)
[ "$jobs" -gt 16 ] && jobs=16

start=$(date +%s)
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DDLSCALE_CUDA=ON >"$out/configure.log" 2>&1
configure=$?
build_start=$(date +%s)
cmake --build build-gpu -j "$jobs" --target dlscale test_nccl_gpu test_nccl_fallback test_execution \
  test_gradient_buckets test_device_allocator test_layer_gpu >"$out/build.log" 2>&1
build=$?
build_time=$(( $(date +%s) - build_start ))
build-gpu/launch/dlscale info >"$out/info.txt" 2>&1
info=$?
(cd build-gpu && ctest -R "nccl|execution|gradient_buckets" --output-on-failure) >"$out/gpu-tests.log" 2>&1
tests=$?
(cd build-gpu && ctest -R "test_device_allocator" --output-on-failure) >"$out/allocator-tests.log" 2>&1
allocator=$?
# The layer comparisons directly, so every test's line and error figure is in the log.
timeout 300 build-gpu/tests/gpu/test_layer_gpu >"$out/layer-gpu-tests.log" 2>&1
layers=$?
nvidia-smi >"$out/nvidia-smi.txt" 2>&1 || true

printf '\n%-28s %s\n' "check" "result"
printf '%-28s %s\n' "configure (DLSCALE_CUDA=ON)" "$(status $configure)"
printf '%-28s %s\n' "build" "$(status $build) in ${build_time}s"
printf '%-28s %s\n' "dlscale info" "$(status $info): $(grep -o '[0-9]* GPU(s)[^)]*' "$out/info.txt" | head -1)"
printf '%-28s %s\n' "GPU tests (NCCL all-reduce)" "$(status $tests): $(grep -Eo '[0-9]+% tests passed.*' "$out/gpu-tests.log" | head -1)"
printf '%-28s %s\n' "caching allocator (host)" "$(status $allocator)"
printf '%-28s %s\n' "CUDA layers vs CPU" "$(status $layers)"
printf '%-28s %s\n' "skipped" "$(grep -c 'Skipped' "$out/gpu-tests.log")"
printf '%-28s %ss\n' "wall time" "$(( $(date +%s) - start ))"

# One row per layer test: gtest's verdict and the largest relative error it measured.
printf '\n%-52s %-8s %s\n' "test" "status" "max relative error"
awk '
  /^\[ GPU_CHECK \]/ { split($5, kv, "="); err[$4] = kv[2] }
  /^\[       OK \]/ { st[$4] = "ok"; order[++n] = $4 }
  /^\[  FAILED  \]/ && $5 ~ /^\(/ { st[$4] = "FAILED"; order[++n] = $4 }
  /^\[  SKIPPED \]/ && $5 ~ /^\(/ { st[$4] = "skipped"; order[++n] = $4 }
  END {
    for (i = 1; i <= n; ++i) { t = order[i]; printf "%-52s %-8s %s\n", t, st[t], (t in err) ? err[t] : "-" }
    if (n == 0) print "(no layer test ran: see layer-gpu-tests.log)"
  }' "$out/layer-gpu-tests.log"
printf '%-52s %-8s %s\n' "GPU training (Fashion-MNIST CNN)" "TODO" "not wired yet: the trainer runs on the CPU only"
printf '%-52s %-8s %s\n' "PyTorch comparison (bench/pytorch_cnn.py)" "TODO" "not wired yet: needs GPU training"
