#!/usr/bin/env bash
# GPU checks for a lent GPU machine (run through the device tool): builds with
# CUDA (only the targets below), runs device discovery, the NCCL all-reduce
# path, the caching allocator and every CUDA layer against its CPU layer
# (tests/gpu); then trains the Fashion-MNIST CNN (examples/fashion-mnist/cnn.ini)
# on the GPU in float32 (test accuracy and samples/s from summary.json, and
# two one-epoch --deterministic runs whose model.h5 files are compared with
# cmp), trains it under automatic-mixed (bf16 with accuracy, fp16 with the
# loss scaler), and times PyTorch (bench/pytorch_cnn.py --device cuda) on the
# same network, batch and precision: float32 and bf16 autocast; then one
# epoch each of the ResNet-20 and transformer examples. Prints a short
# table last. SECTIONS=quality runs instead the full trainings of both
# examples against bench/pytorch_models.py (quality() below).
#
# Time: every step runs under `timeout`, its own limit cut to what is left of
# GPU_CHECK_SECONDS (default 330) since the start, so the table comes out
# within 330 s whatever hangs, leaving room in the issue's 15 minutes of
# device time for the machine's start and a second, shorter run; a step that fails reads
# FAILED in its row, one that found no time left SKIPPED. The training
# steps are capped (150 s for the EPOCHS=3 accuracy runs, 60-90 s for the
# others).
#
# Programs: the lent machine's image, as described to us, has nvcc, CMake and
# PyTorch but no Open MPI, HDF5, Boost, OpenBLAS or GoogleTest, and nothing
# can be installed there. So they are built here and carried:
#   bench/gpu_bundle.sh         # here: gpu-bundle.tar.xz (programs + libraries, ~10 min on 2 cores)
# The script unpacks it, finds that machine's cuBLAS, cuDNN and NCCL (CUDA
# toolkit or PyTorch's wheels) and runs every rank as an isolated MPI
# singleton. Without the bundle it builds with CUDA there (about 3 minutes
# on 16 cores), which needs those libraries installed.
#
# Data: the lent machine has no Fashion-MNIST (no Debian package, no network),
# so stage it here first and carry it (bench/gpu_data.sh says more):
#   bench/gpu_data.sh stage     # once here: Debian's files to data/fashion-mnist-idx (31 MB, ignored)
#   device run: command "bash bench/gpu_check.sh", carry ["gpu-bundle.tar.xz", "data/fashion-mnist-idx"],
#   timeout_s 500
# Without that folder it trains on synthetic data of the same shape, and the
# table says so.
#
# Before running anything it writes `ldd ... | grep "not found"` of every
# program into ldd.txt (in the logs); compute-sanitizer (memcheck, then
# racecheck) runs over the layer tests last, when the machine has it and time
# is left.
#
# Results go under $OUT (default ./gpu-check-out): table.txt (the table printed
# last), measured.txt (every "measured:" line of the GPU tests: each checked
# figure with its bound and ok or FAILED, tests/gpu/measured.h) and
# logs.tar.gz (every step's log, nvidia-smi.txt and the training run
# directories, model files left out); the device tool returns at most 8 files.
#   bench/gpu_check.sh          (PYTHON: the python3 with torch, default python3)
set -uo pipefail
cd "$(dirname "$0")/.." || exit
out=${OUT:-gpu-check-out}
# Step logs gather in $logs and come back as one file (the device tool returns at most 8).
logs=runs/gpu-check-logs
rm -rf "$logs"
mkdir -p "$out" "$logs"
if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
status() {
  case $1 in
    0) echo ok ;;
    124 | 137) echo "FAILED (timeout)" ;;
    125) echo "SKIPPED (no time left)" ;;
    *) echo "FAILED ($1)" ;;
  esac
}
jobs=$(nproc)
[ "$jobs" -gt 16 ] && jobs=16
py=${PYTHON:-python3}

start=$(date +%s)
deadline=$(( start + ${GPU_CHECK_SECONDS:-330} ))
# step LIMIT LOG COMMAND...: COMMAND with its output in LOG, killed (with its
# children) after LIMIT seconds or at the deadline, whichever comes first.
# Returns COMMAND's status, 124/137 on a timeout, 125 when under 10 s were left.
step() {
  local limit=$1 log=$2 left
  shift 2
  left=$(( deadline - $(date +%s) ))
  [ "$left" -lt "$limit" ] && limit=$left
  if [ "$limit" -lt 10 ]; then echo "not started: the time was up" >"$log"; return 125; fi
  timeout -k 5 "$limit" "$@" >"$log" 2>&1
}

# --- SECTIONS=quality: the real models against PyTorch, trained in full ----
# Issue #18's quality comparison on the GPU, where a full training takes a
# minute instead of hours: resnet.ini (20 epochs, test accuracy) and
# transformer.ini (4 epochs, validation loss per token), each trained by
# dlscale and by bench/pytorch_models.py on the same data in the same
# order (--shuffle never: file order on both sides), batch, schedule and
# steps, float32 (TF32 off). Runs instead of everything else; the
# transformer pair first, the cheaper one. Set GPU_CHECK_SECONDS to fit.
quality() {
  local r t
  if [ -d "$data/text-train" ]; then
    step 100 "$work/q-transformer-dlscale.log" "$dl" train examples/text/transformer.ini --train-data "$data/text-train" \
      --validation-data "$data/text-val" --test-data "" --shuffle never --execution-environment gpu \
      --output "$work/q-transformer"
    t=$?
    step 100 "$work/q-transformer-pytorch.log" "$py" bench/pytorch_models.py --model examples/text/transformer.ini \
      --data "$data/text-train" --eval "$data/text-val" --train-epochs 4 --device cuda --threads "$jobs"
    r=$?
  fi
  step 150 "$work/q-resnet-dlscale.log" "$dl" train examples/fashion-mnist/resnet.ini --train-data "$data/train" \
    --validation-data "" --test-data "$data/test" --shuffle never --execution-environment gpu --output "$work/q-resnet"
  local rt=$?
  step 150 "$work/q-resnet-pytorch.log" "$py" bench/pytorch_models.py --model examples/fashion-mnist/resnet.ini \
    --data "$data/train" --eval "$data/test" --train-epochs 20 --device cuda --threads "$jobs"
  local rr=$?
  tar czf "$out/logs.tar.gz" --exclude='*.h5' -C runs gpu-check-logs gpu-check 2>/dev/null
  {
    printf '\n%-52s %-10s %s\n' "quality, dlscale against PyTorch, GPU float32" "status" "result"
    q_row "transformer.ini, 4 epochs: dlscale" "$t" "$(q_summary "$work/q-transformer/summary.json" validation_loss)"
    q_row "transformer.ini, 4 epochs: PyTorch" "$r" "$(sed -n 's/^eval_loss /validation loss /p; s/^steps /steps /p; s/^train_s /train s /p' "$work/q-transformer-pytorch.log" 2>/dev/null | paste -sd, -)"
    q_row "resnet.ini, 20 epochs: dlscale" "$rt" "$(q_summary "$work/q-resnet/summary.json" test_accuracy)"
    q_row "resnet.ini, 20 epochs: PyTorch" "$rr" "$(sed -n 's/^eval_accuracy /test accuracy /p; s/^steps /steps /p; s/^train_s /train s /p' "$work/q-resnet-pytorch.log" 2>/dev/null | paste -sd, -)"
    printf '%-52s %-10s %s\n' "wall time" "" "$(( $(date +%s) - start ))s of ${GPU_CHECK_SECONDS:-330}s"
  } | tee "$out/table.txt"
}
q_row() { printf '%-52s %-10s %s\n' "$1" "$(status "${2:-125}")" "$3"; }
# q_summary SUMMARY KEY: "KEY value, N steps, S s" from a dlscale summary.json.
q_summary() {
  "$py" - "$1" "$2" <<'EOF' 2>/dev/null || echo "no summary.json"
import json, sys
s = json.load(open(sys.argv[1]))
print(f"{sys.argv[2].replace('_', ' ')} {s[sys.argv[2]]:.4f}, steps {s['iterations']}, wall s {s['wall_time_s']:.0f}")
EOF
}

# --- the programs: from the bundle, or built here --------------------------
tests=(test_nccl_gpu test_device_allocator test_layer_gpu test_train_gpu)
build_start=$(date +%s)
if [ -f gpu-bundle.tar.xz ]; then
  how="bundle (built elsewhere)"
  bundle=/tmp/dlscale-gpu-bundle
  # Unpacks, then prints the folders of this machine's CUDA libraries: the
  # toolkit's, or PyTorch's wheels (nvidia/*/lib). (`timeout` runs programs, not functions.)
  # Python's tarfile unpacks it where no xz program is installed.
  step 120 "$logs/build.log" bash -c 'rm -rf "$1" && mkdir -p "$1" || exit
    tar -xJf gpu-bundle.tar.xz -C "$1" 2>/dev/null || "$2" -c "import sys, tarfile
tarfile.open(\"gpu-bundle.tar.xz\").extractall(sys.argv[1], **({\"filter\": \"fully_trusted\"} if hasattr(tarfile, \"fully_trusted_filter\") else {}))" "$1" || exit
    { find /usr/local /opt /usr/lib /usr/lib64 \( -name libcublas.so.13 -o -name libcublasLt.so.13 -o -name libcudnn.so.9 \
        -o -name libnccl.so.2 \) 2>/dev/null
      "$2" -c "import glob, os, site, sys
roots = site.getsitepackages() + [site.getusersitepackages()] + sys.path
for r in roots:
    for lib in glob.glob(os.path.join(r, \"nvidia\", \"*\", \"lib\", \"lib*.so*\")):
        print(lib)" 2>/dev/null; } | grep -E "libcublas(Lt)?\.so\.13|libcudnn\.so\.9|libnccl\.so\.2" |
      xargs -r -n1 dirname | sort -u' unpack "$bundle" "$py"
  build=$?
  cuda_dirs=$(grep '^/' "$logs/build.log" | paste -sd:)
  # One wrapper per program sets its environment, so PyTorch's python never
  # sees the bundle's libraries: the bundle's libraries first, then this
  # machine's CUDA ones; Open MPI from the bundle (OPAL_PREFIX relocates its
  # plugins), every rank a singleton without orted; HDF5 locks files where
  # the file system lets it (an overlay that refuses flock would fail every open).
  mkdir -p "$bundle/run"
  for f in "$bundle"/bin/*; do
    cat >"$bundle/run/${f##*/}" <<EOF
#!/bin/sh
export LD_LIBRARY_PATH="$bundle/lib${cuda_dirs:+:$cuda_dirs}\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
export OPAL_PREFIX="$bundle/usr" OMPI_MCA_ess_singleton_isolated=1
export HDF5_USE_FILE_LOCKING=\${HDF5_USE_FILE_LOCKING:-BEST_EFFORT}
export PMIX_MCA_mca_base_component_path="$bundle/usr/lib/x86_64-linux-gnu/pmix2/lib/pmix"
exec "$f" "\$@"
EOF
    chmod +x "$bundle/run/${f##*/}"
  done
  program() { echo "$bundle/run/$1"; }
  # What the loader would not find, before anything runs (an empty ldd.txt is the good news).
  for f in "$bundle"/bin/*; do
    LD_LIBRARY_PATH="$bundle/lib${cuda_dirs:+:$cuda_dirs}" ldd "$f" 2>&1 | grep "not found" | sed "s|^|${f##*/}: |"
  done >"$logs/ldd.txt"
  configure=0
else
  how="built here"
  step 120 "$logs/configure.log" cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DDLSCALE_CUDA=ON
  configure=$?
  step 300 "$logs/build.log" cmake --build build-gpu -j "$jobs" --target dlscale "${tests[@]}"
  build=$?
  program() { find build-gpu -name "$1" -type f -perm -u+x | head -1; }
fi
build_time=$(( $(date +%s) - build_start ))
[ -f "$logs/ldd.txt" ] || for t in dlscale "${tests[@]}"; do
  f=$(program "$t")
  [ -n "$f" ] && ldd "$f" 2>&1 | grep "not found" | sed "s|^|$t: |"
done >"$logs/ldd.txt"
dl=$(program dlscale)
quality_only=false
[ "${SECTIONS:-}" = quality ] && quality_only=true
if ! $quality_only; then
step 30 "$logs/info.txt" "$dl" info
info=$?
# The tests directly (not through ctest, which would look for this machine's
# mpiexec), so every test's line and error figure is in its log.
step 60 "$logs/nccl-tests.log" "$(program test_nccl_gpu)"
nccl_rc=$?
step 60 "$logs/allocator-tests.log" "$(program test_device_allocator)"
allocator=$?
step 120 "$logs/layer-gpu-tests.log" "$(program test_layer_gpu)"
layers=$?
# trainnet on the GPU: against the CPU, deterministic and resumed runs, loss scaling, automatic-mixed, fp16 overflow.
step 150 "$logs/train-gpu-tests.log" "$(program test_train_gpu)"
train_tests=$?
fi
nvidia-smi >"$logs/nvidia-smi.txt" 2>&1 || true

# --- Fashion-MNIST CNN on the GPU, and PyTorch on the same network ----------
config=examples/fashion-mnist/cnn.ini
batch=$(sed -n 's/^mini-batch-size *= *//p' "$config")  # PyTorch gets the batch the config trains with
data=data/gpu-check  # shards and (synthetic) idx files, ignored through data/
work=runs/gpu-check  # run directories and step logs, ignored through runs/
rm -rf "$work"
mkdir -p "$work"
step 90 "$work/data.log" bash bench/gpu_data.sh "$dl" "$data"
data_rc=$?
idx=$(cat "$data/idx" 2>/dev/null)
source=$(cat "$data/source" 2>/dev/null || echo "none: see data.log")
if $quality_only; then
  quality
  exit
fi

# train LIMIT NAME OPTION...: the CNN on the GPU into $work/NAME.
train() {
  local limit=$1 name=$2
  shift 2
  step "$limit" "$work/$name.log" "$dl" train --config "$config" --train-data "$data/train" \
    --execution-environment gpu --output "$work/$name" "$@"
}
# pytorch LIMIT NAME OPTION...: bench/pytorch_cnn.py on the GPU, data held on the GPU; samples/s, median of 3 epochs.
pytorch() {
  local limit=$1 name=$2
  shift 2
  step "$limit" "$work/$name.log" "$py" bench/pytorch_cnn.py --model "$config" --data "$idx" --device cuda \
    --batch "$batch" --threads "$jobs" --warmup 50 --iterations 0 --repeats 3 "$@"
}
epochs=${EPOCHS:-3}
# Most telling first, so a short time leaves out the least: float32 accuracy
# and speed against PyTorch, automatic-mixed (bf16) against PyTorch's bf16
# autocast, determinism, fp16 with the loss scaler.
train 150 cnn --max-epochs "$epochs" --validation-data "$data/test" --test-data "$data/test"
train_rc=$?
pytorch 90 pytorch-fp32
pytorch_rc=$?
train 150 amp-bf16 --max-epochs "$epochs" --validation-data "$data/test" --test-data "$data/test" \
  --training-precision automatic-mixed --mixed-precision-type bf16
amp_bf16_rc=$?
pytorch 60 pytorch-bf16 --autocast bf16
bf16_rc=$?
# One epoch without validation or test is enough to show whether two runs agree bit for bit.
train 60 deterministic-1 --max-epochs 1 --deterministic true --validation-data "" --test-data ""
det1=$?
train 60 deterministic-2 --max-epochs 1 --deterministic true --validation-data "" --test-data ""
det2=$?
train 60 amp-fp16 --max-epochs 1 --validation-data "" --test-data "$data/test" \
  --training-precision automatic-mixed --mixed-precision-type fp16
amp_fp16_rc=$?
# The real models of issue #18 on the GPU, one epoch each, float32: the
# ResNet-20 of examples/fashion-mnist/resnet.ini (with its augmentation) and
# the 4-layer transformer of examples/text/transformer.ini on the fortunes.
step 120 "$work/resnet.log" "$dl" train examples/fashion-mnist/resnet.ini --train-data "$data/train" \
  --validation-data "" --test-data "$data/test" --max-epochs 1 --execution-environment gpu --output "$work/resnet"
resnet_rc=$?
transformer_rc=126
if [ -d "$data/text-train" ]; then
  step 120 "$work/transformer.log" "$dl" train examples/text/transformer.ini --train-data "$data/text-train" \
    --validation-data "$data/text-val" --test-data "" --max-epochs 1 --execution-environment gpu \
    --output "$work/transformer"
  transformer_rc=$?
fi
# Last, with whatever time is left: memory errors and races in the layer tests.
sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
memcheck=126 racecheck=126
if [ -n "$sanitizer" ]; then
  step 90 "$logs/memcheck.log" "$sanitizer" --tool memcheck --error-exitcode 9 "$(program test_layer_gpu)"
  memcheck=$?
  step 90 "$logs/racecheck.log" "$sanitizer" --tool racecheck --error-exitcode 9 "$(program test_layer_gpu)"
  racecheck=$?
fi
# The tests' figures, pass or fail, in one file (not the sanitizer's reruns).
grep -h '^measured:' "$logs"/*-tests.log >"$out/measured.txt" 2>/dev/null
tar czf "$out/logs.tar.gz" --exclude='*.h5' -C runs gpu-check-logs gpu-check 2>/dev/null

# Reads the figures from summary.json: "test accuracy A, S samples/s (device D)".
summary() {
  "$py" - "$1" <<'EOF' 2>/dev/null || echo "no summary.json"
import json, sys
s = json.load(open(sys.argv[1]))
acc = s.get("test_accuracy")
skipped = f", {s['skipped_steps']} skipped" if s.get("mixed_precision_type") == "fp16" else ""
print(f"test accuracy {'-' if acc is None else format(acc, '.4f')}, "
      f"{s['samples_per_second']:.0f} samples/s, {s['epochs']} epoch(s){skipped} (device {s['device']})")
EOF
}
# Reads a token model's figures from summary.json: validation loss per token, tokens/s.
tokens_summary() {
  "$py" - "$1" <<'EOF' 2>/dev/null || echo "no summary.json"
import json, sys
s = json.load(open(sys.argv[1]))
print(f"validation loss {s['validation_loss']:.4f} nats/token (perplexity {s['validation_perplexity']:.2f}), "
      f"{s['samples_per_second'] * 128:.0f} tokens/s, {s['epochs']} epoch(s) (device {s['device']})")
EOF
}
samples_per_second() { "$py" -c 'import json, sys; print(round(json.load(open(sys.argv[1]))["samples_per_second"]))' "$1" 2>/dev/null; }
# ratio_row LABEL OURS THEIRS: dlscale / PyTorch samples/s against the 1.2 target.
ratio_row() {
  if [ -n "$2" ] && [ -n "$3" ]; then
    local ratio verdict
    ratio=$(awk -v a="$2" -v b="$3" 'BEGIN { printf "%.2f", a / b }')
    verdict=$(awk -v r="$ratio" 'BEGIN { print (r >= 1.2) ? "ok" : "below target" }')
    row "$1" "$verdict" "$ratio (target >= 1.2)"
  else
    row "$1" "FAILED" "needs both figures above"
  fi
}
# first_difference A B: the first dataset or the file attributes that differ
# between two model files, to say what a failed cmp is about (model files
# carry no timestamps, so identical trainings give identical bytes).
first_difference() {
  "$py" - "$1" "$2" <<'EOF'
import sys, h5py
def contents(path):
    found = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda name, obj: found.update({name: obj[()].tobytes()}) if isinstance(obj, h5py.Dataset) else None)
        found["(file attributes)"] = repr(sorted(f.attrs.items()))
    return found
a, b = contents(sys.argv[1]), contents(sys.argv[2])
differ = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
print(differ[0] if differ else "no dataset or attribute: the HDF5 layout")
EOF
}
pytorch_rate() { grep -Eo '^[0-9]+(\.[0-9]+)?$' "$1" | head -1; }  # the samples/s line of pytorch_cnn.py
rate_text() { if [ -n "$1" ]; then echo "$1 samples/s, $2"; else echo "no figure (see $3)"; fi; }
row() { printf '%-44s %-22s %s\n' "$1" "$2" "$3"; }

# The table, last: on the terminal and in $OUT/table.txt.
{
printf '\n%-28s %s\n' "check" "result"
printf '%-28s %s\n' "programs" "$how"
[ "$how" = "built here" ] && printf '%-28s %s\n' "configure (DLSCALE_CUDA=ON)" "$(status $configure)"
printf '%-28s %s\n' "build or unpack" "$(status $build) in ${build_time}s"
printf '%-28s %s\n' "libraries not found (ldd)" "$(wc -l <"$logs/ldd.txt" 2>/dev/null || echo "?") (ldd.txt)"
printf '%-28s %s\n' "carried (du)" "$(du -sh --exclude=runs --exclude=gpu-check-out --exclude=build --exclude=.git --exclude=gpu-check . 2>/dev/null | cut -f1) tree with bundle and data (limit 64 MiB; the shards made here left out)"
printf '%-28s %s\n' "dlscale info" "$(status $info): $(grep -o '[0-9]* GPU(s)[^)]*' "$logs/info.txt" | head -1)"
printf '%-28s %s\n' "NCCL all-reduce (1 rank)" "$(status $nccl_rc)"
printf '%-28s %s\n' "caching allocator (host)" "$(status $allocator)"
printf '%-28s %s\n' "CUDA layers vs CPU" "$(status $layers)"
printf '%-28s %s\n' "trainnet on the GPU (tests)" "$(status $train_tests): $(sed -n 's/^measured: TrainGpu\.AutomaticMixed[^ ]* \[\([a-z0-9]*\)\] test accuracy = \([^ ]*\) (bound \([^ ]*\) .*/automatic-mixed \1 test accuracy \2 (float32 \3)/p' "$logs/train-gpu-tests.log" | paste -sd';')"
# sanitized STATUS LOG: the sanitizer's own verdict (its exit code is 9 when
# it found something) apart from the tests' (1 when a test failed).
sanitized() {
  case $1 in
    126) echo "not run (no compute-sanitizer)" ;;
    0 | 1) echo "$(grep -Eo '(ERROR|RACECHECK) SUMMARY: .*' "$2" | tail -1)$([ "$1" = 1 ] && echo "; a layer test failed (above)")" ;;
    *) echo "$(status "$1"): $(grep -Eo '(ERROR|RACECHECK) SUMMARY: .*' "$2" | tail -1)" ;;
  esac
}
printf '%-28s %s\n' "compute-sanitizer memcheck" "$(sanitized $memcheck "$logs/memcheck.log")"
printf '%-28s %s\n' "compute-sanitizer racecheck" "$(sanitized $racecheck "$logs/racecheck.log")"
printf '%-28s %s\n' "measured (measured.txt)" "$(grep -c ' ok$' "$out/measured.txt") within bounds, $(grep -c ' FAILED$' "$out/measured.txt") outside, $(grep -c '(no bound)$' "$out/measured.txt") without"
printf '%-28s %s\n' "tests skipped" "$(cat "$logs"/*-tests.log 2>/dev/null | grep -c '^\[  SKIPPED \] [A-Za-z].*ms)$')"

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
  }' "$logs/layer-gpu-tests.log"

# Training: both sides float32, batch $batch, the same network; the ratio compares
# dlscale's whole training loop (HDF5 loader, host-to-device copies, validation
# time left out) with PyTorch stepping on data already on the GPU.
printf '\n%-44s %-22s %s\n' "Fashion-MNIST CNN on the GPU (batch $batch)" "status" "result"
row "data" "$(status $data_rc)" "$source"
row "dlscale GPU training, float32" "$(status $train_rc)" "$(summary "$work/cnn/summary.json")"
ours=$(samples_per_second "$work/cnn/summary.json")
theirs=$(pytorch_rate "$work/pytorch-fp32.log")
row "PyTorch GPU, float32 (data on the GPU)" "$(status $pytorch_rc)" "$(rate_text "$theirs" "median of 3 epochs" pytorch-fp32.log)"
ratio_row "ratio dlscale / PyTorch, float32" "$ours" "$theirs"
row "dlscale GPU, automatic-mixed bf16" "$(status $amp_bf16_rc)" "$(summary "$work/amp-bf16/summary.json")"
bf16=$(pytorch_rate "$work/pytorch-bf16.log")
row "PyTorch GPU, bf16 autocast (data on GPU)" "$(status $bf16_rc)" "$(rate_text "$bf16" "median of 3 epochs" pytorch-bf16.log)"
ratio_row "ratio dlscale / PyTorch, bf16" "$(samples_per_second "$work/amp-bf16/summary.json")" "$bf16"
m1=$work/deterministic-1/model.h5 m2=$work/deterministic-2/model.h5
cmp -s "$m1" "$m2"
case "$det1 $det2 $?" in
  "0 0 0") row "deterministic (2 runs, cmp model.h5)" "ok" "identical" ;;
  "0 0 "*) row "deterministic (2 runs, cmp model.h5)" "FAILED" \
    "different: $(first_difference "$m1" "$m2" 2>/dev/null || echo "could not compare values")" ;;
  *) row "deterministic (2 runs, cmp model.h5)" "FAILED" "run 1: $(status $det1), run 2: $(status $det2)" ;;
esac
row "dlscale GPU, automatic-mixed fp16" "$(status $amp_fp16_rc)" "$(summary "$work/amp-fp16/summary.json")"
printf '\n%-44s %-22s %s\n' "Real models on the GPU, 1 epoch, float32" "status" "result"
row "ResNet-20 (resnet.ini), batch 128" "$(status $resnet_rc)" "$(summary "$work/resnet/summary.json")"
if [ "$transformer_rc" = 126 ]; then
  row "transformer (transformer.ini), batch 32" "not run" "no fortunes.txt carried (bench/gpu_data.sh stage)"
else
  row "transformer (transformer.ini), batch 32" "$(status $transformer_rc)" "$(tokens_summary "$work/transformer/summary.json")"
fi
row "wall time" "" "$(( $(date +%s) - start ))s of ${GPU_CHECK_SECONDS:-330}s"
} | tee "$out/table.txt"
