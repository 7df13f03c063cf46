#!/usr/bin/env bash
# A sanitizer lane (docs/reliability.md, "Sanitizer lanes"); tests/run.sh
# --sanitize address|thread calls it:
#   tests/sanitizers/lane.sh address|thread [more ctest arguments]
# Configures a CPU build with -DDLSCALE_SANITIZE into its own folder
# (build-asan/, build-tsan/; DLSCALE_SANITIZE_BUILD overrides), builds it,
# and runs the lane's tests with the sanitizers' options and suppressions of
# tests/sanitizers/env.sh.
#   address: ASan + UBSan (GCC), the unit tests and the MPI tests, the CLI
#            end to end, the preemption stress on 2 and 3 ranks (50 signals
#            each) and the start-up stress (30 two-node starts on the
#            namespace cluster, registered in this build only); not the
#            other cluster, Slurm, GPU, example and benchmark tests, nor
#            those that LD_PRELOAD a fault shim (ASan must be the first
#            library loaded) or start many 4-rank jobs (time).
#   thread:  TSan (clang, libomp with Archer), the tests of the threaded
#            parts: test_threads (all of a run's threads at once), the loader,
#            telemetry, gradient buckets, deterministic sums, the OpenMP
#            kernels, the heartbeat and idle-wait threads (lost ranks, idle
#            wait) and the preemption stress (40 signals per rank count).
set -euo pipefail
lane=${1:-}
shift || true
cd "$(dirname "$0")/../.."

case $lane in
  address)
    build=${DLSCALE_SANITIZE_BUILD:-$PWD/build-asan}
    configure=(-DDLSCALE_SANITIZE=address,undefined)
    # ASan makes each run of the preemption stress several times slower:
    # 50 signals per rank count fit CI's time (docs/reliability.md).
    export DLSCALE_STRESS_POINTS=${DLSCALE_STRESS_POINTS:-50}
    # Labels and names of what the lane leaves out (see above).
    select=(-LE "^(cluster|slurm|gpu)$"
            -E "^(example_|report_render$|test_chaos$|test_filesystem_faults$|test_reduction_order$|test_step_profile_model$|test_layer_bench_graph$)")
    ;;
  thread)
    build=${DLSCALE_SANITIZE_BUILD:-$PWD/build-tsan}
    configure=(-DDLSCALE_SANITIZE=thread -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang)
    select=(-R "^(test_threads|test_io_loader|test_telemetry|test_gradient_buckets|test_fixed_order_allreduce|test_loss_scaler|test_attention|test_layernorm|test_gemm|test_conv2d|test_dense|test_preemption_stress|test_lost_ranks|test_idle_wait)$")
    # Races, not counts, under TSan's 5-15x slowdown: fewer signals.
    export DLSCALE_STRESS_POINTS=${DLSCALE_STRESS_POINTS:-40}
    ;;
  *)
    echo "usage: tests/run.sh --sanitize address|thread [ctest arguments]" >&2
    exit 2
    ;;
esac

start=$SECONDS
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDLSCALE_CUDA=OFF "${configure[@]}" \
  >"$build-configure.log" 2>&1 || { cat "$build-configure.log"; exit 1; }
cmake --build "$build" -j "$(nproc)"
built=$SECONDS

# shellcheck source=tests/sanitizers/env.sh
. tests/sanitizers/env.sh "$lane"
if [ "$lane" = thread ]; then
  # Without Archer every OpenMP region would report races that are not
  # there: stop here rather than run a lane that cannot be trusted. The
  # probe is built as the lane's targets are (clang, -fopenmp, TSan).
  probe=$build/archer-probe
  printf '%s\n' '#include <omp.h>' 'int main() { int n = 0;' '#pragma omp parallel reduction(+ : n)' \
    '  n += 1;' '  return n > 0 ? 0 : 1; }' >"$probe.cpp"
  clang++ -fopenmp -fsanitize=thread "$probe.cpp" -o "$probe"
  if ! OMP_TOOL_VERBOSE_INIT=stdout OMP_NUM_THREADS=2 "$probe" 2>&1 | grep -q "Using archer tool"; then
    echo "thread lane: libomp did not load Archer (libarcher.so, package libomp-14-dev); OpenMP would report false races" >&2
    exit 1
  fi
fi
cd "$build"
status=0
ctest --output-on-failure -j "$(nproc)" "${select[@]}" "$@" || status=$?
echo "sanitizer lane $lane: build $((built - start)) s, tests $((SECONDS - built)) s"
exit "$status"
