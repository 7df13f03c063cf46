#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan+UBSan) into build-fuzz/ and runs
# each for a bounded time: tests/fuzz/run.sh [seconds per target, default 60].
# Every run first replays the committed seeds and regressions/<target>/, then
# mutates. Exits non-zero when any target crashed, leaked, failed a sanitizer
# check or timed out on an input; the input is left in
# build-fuzz/fuzz-artifacts/<target>/ (copy it to regressions/<target>/ once fixed).
# The seed is fixed (DLSCALE_FUZZ_SEED, default 1) so that a run can be
# repeated: the same build and fresh corpus (the shard seeds are
# byte-identical from run to run) mutate into the same inputs, and a faster
# machine only goes further along the same sequence; a change to the library
# changes the coverage map, and with it the sequence. DLSCALE_FUZZ_SEED=0
# lets libFuzzer pick a seed, for exploring beyond what CI covers.
set -euo pipefail
seconds=${1:-60}
seed=${DLSCALE_FUZZ_SEED:-1}
cd "$(dirname "$0")/../.."
src=$PWD/tests/fuzz
build=${DLSCALE_FUZZ_BUILD:-$PWD/build-fuzz}

cmake -S . -B "$build" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang -DDLSCALE_CUDA=OFF \
  -DDLSCALE_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$build-configure.log" 2>&1 ||
  { cat "$build-configure.log"; exit 1; }
cmake --build "$build" -j "$(nproc)" --target fuzz_config fuzz_shard fuzz_make_shard_seed

export OMP_NUM_THREADS=1
# The targets' scratch folders (an aborted run cannot remove its own).
export TMPDIR=$build/fuzz-tmp
rm -rf "$TMPDIR" && mkdir -p "$TMPDIR"
# allocator_may_return_null: a malloc too large to serve fails as it does
# in production (libhdf5 asks for sizes read from a damaged file and turns
# the failure into an error) instead of aborting the run.
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/tests/sanitizers/lsan.supp}  # libhdf5's own leaks on damaged files (shared with the sanitizer lanes)
# The shard seeds come from the real writer of this build, beside the committed ones.
"$build/tests/fuzz/fuzz_make_shard_seed" "$build/fuzz-corpus/fuzz_shard"

failed=()
for target in fuzz_config fuzz_shard; do
  corpus=$build/fuzz-corpus/$target artifacts=$build/fuzz-artifacts/$target
  mkdir -p "$corpus" "$artifacts"
  extra=()
  [ -f "$src/$target.dict" ] && extra=(-dict="$src/$target.dict")
  # Such a malloc may also be merely large (reserved, never touched): the
  # RSS limit still catches memory that is really used.
  [ "$target" = fuzz_shard ] && extra+=(-malloc_limit_mb=1048576)
  echo "== $target: ${seconds} s, seed $seed"
  if ! "$build/tests/fuzz/$target" "$corpus" "$src/corpus/$target" "$src/regressions/$target" "${extra[@]}" \
      -seed="$seed" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=16384 \
      -artifact_prefix="$artifacts/" -print_final_stats=1 2>"$build/fuzz-$target.log"; then
    tail -n 60 "$build/fuzz-$target.log"
    failed+=("$target")
  else
    grep -E "^(stat::number_of_executed_units|stat::new_units_added|INFO: Done)" "$build/fuzz-$target.log" || true
  fi
done
if ((${#failed[@]})); then
  echo "fuzzing found a bug in: ${failed[*]}; inputs in $build/fuzz-artifacts/" >&2
  ls -l "$build"/fuzz-artifacts/*/ >&2
  exit 1
fi
echo "fuzzing: no crash in ${seconds} s per target"
