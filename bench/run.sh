#!/usr/bin/env bash
# Issue #7 figures in one run, every ratio measured side by side (prints one table):
#  1. training samples/s of the MLP and the CNN of bench/models/ against PyTorch
#     (Debian's python3-torch, bench/pytorch_cnn.py) on the same network, batch,
#     data, optimizer and thread count; dlscale and PyTorch alternate, REPEATS times;
#  2. GFLOP/s of those training steps against sgemm timed at the same GEMM
#     shapes in the same run (the practical limit: the faster of OpenBLAS and
#     oneDNN, which dlscale's float32 GEMM runs on), and a 2048³ sgemm (peak);
#  3. data loading: DatasetReader / PrefetchLoader over the Fashion-MNIST shards
#     against read() of the same files (page cache warm both times), and the step
#     time with the real loader against the step on batches already in memory;
#  4. the bucketed gradient all-reduce against plain MPI_Allreduce of the same bytes
#     (2 ranks).
# Medians over REPEATS; every figure is time-boxed by iteration counts, not epochs.
#   bench/run.sh                 (about 5 minutes on a quiet 2-core machine)
# Environment: DLSCALE_BUILD (build folder, default build; built here if a program
# is missing), THREADS (2), REPEATS (3), MLP_STEPS (200), CNN_STEPS (40),
# KEEP (folder to keep the raw outputs in).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${DLSCALE_BUILD:-build}
threads=${THREADS:-2} repeats=${REPEATS:-3}
mlp_steps=${MLP_STEPS:-200} cnn_steps=${CNN_STEPS:-40}
py=/usr/bin/python3
src=/usr/share/datasets/fashion-mnist
data=data/fashion-mnist

"$py" -c "import torch" 2>/dev/null || { echo "bench/run.sh needs python3-torch (apt-get install python3-torch)" >&2; exit 1; }
[ -f "$src/train-images-idx3-ubyte.gz" ] || { echo "bench/run.sh needs dataset-fashion-mnist (apt-get install dataset-fashion-mnist)" >&2; exit 1; }
programs=(launch/dlscale bench/train_bench bench/loader_bench bench/allreduce_bench)
for p in "${programs[@]}"; do
  if [ ! -x "$build/$p" ]; then
    echo "building ${programs[*]##*/} in $build ..." >&2
    [ -f "$build/CMakeCache.txt" ] || cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$build" -j"$(nproc)" --target dlscale train_bench loader_bench allreduce_bench >/dev/null
    break
  fi
done
# Sharded once; again when the shards predate their CRC-32 in index.json.
for split in train:train t10k:test; do
  name=${split%%:*} out=$data/${split##*:}
  grep -qs '"crc32"' "$out/index.json" || "$build/launch/dlscale" shard --images "$src/$name-images-idx3-ubyte.gz" \
    --labels "$src/$name-labels-idx1-ubyte.gz" --output "$out" --shards 4 --overwrite >/dev/null
done
if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi

out=${KEEP:-$(mktemp -d)}
mkdir -p "$out"
[ -n "${KEEP:-}" ] || trap 'rm -rf "$out"' EXIT
load_start=$(cut -d' ' -f1 /proc/loadavg)
t_start=$(date +%s)

# The dlscale binary sets OMP_WAIT_POLICY=PASSIVE GOMP_SPINCOUNT=30000 for itself (launch/main.cpp);
# the bench programs get the same setting here. PyTorch runs as a user runs it.
dl() { OMP_WAIT_POLICY=PASSIVE GOMP_SPINCOUNT=30000 "$@"; }

echo "loader ..." >&2
dl "$build/bench/loader_bench" "$data/train" 128 "$repeats" >"$out/loader.txt"
for model in mlp cnn; do
  steps=$mlp_steps
  [ "$model" = cnn ] && steps=$cnn_steps
  for r in $(seq "$repeats"); do
    echo "$model repeat $r/$repeats ..." >&2
    dl "$build/bench/train_bench" "bench/models/$model.ini" "$data/train" "$steps" "$threads" 1 128 \
      >"$out/$model-dlscale-$r.txt"
    "$py" bench/pytorch_cnn.py --model "bench/models/$model.ini" --threads "$threads" --iterations "$steps" \
      --warmup 5 --repeats 1 --cpu >"$out/$model-pytorch-$r.txt"
  done
done
echo "all-reduce ..." >&2
bind=(--bind-to core)
[ "$(nproc)" -ge 2 ] || bind=(--oversubscribe)
dl mpirun -n 2 "${bind[@]}" "$build/bench/allreduce_bench" bench/models/cnn.ini 100 64 >"$out/allreduce.txt"
load_end=$(cut -d' ' -f1 /proc/loadavg)

"$py" - "$out" "$repeats" "$threads" "$load_start" "$load_end" "$(( $(date +%s) - t_start ))" <<'EOF'
import glob, os, platform, statistics, subprocess, sys
out, repeats, threads, load0, load1, secs = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6]

def keys(path):
    d = {}
    for line in open(path):
        if line.startswith("#") or " " not in line.strip():
            continue
        k, v = line.split(None, 1)
        try:
            d[k] = float(v)
        except ValueError:
            d[k] = v.strip()
    return d

def med(model, key):
    return statistics.median(keys(f)[key] for f in sorted(glob.glob(f"{out}/{model}-dlscale-*.txt")))

def torch_line(model, i):  # line 0: samples/s, line 1: CPU ms per step
    return statistics.median(float(open(f).read().split()[i]) for f in sorted(glob.glob(f"{out}/{model}-pytorch-*.txt")))

ld = keys(f"{out}/loader.txt")
ar = {}
for line in open(f"{out}/allreduce.txt"):
    parts = line.rsplit(None, 1)
    if len(parts) == 2:
        ar[parts[0].strip()] = parts[1]

rows = []  # measure, dlscale, baseline, ratio, target
for m in ("mlp", "cnn"):
    ours, theirs = med(m, "loader_samples_per_s"), torch_line(m, 0)
    rows.append((f"{m.upper()} training samples/s (real loader) vs PyTorch", f"{ours:.0f}", f"{theirs:.0f}",
                 ours / theirs, ">= 2"))
for m in ("mlp", "cnn"):
    ours, theirs = med(m, "memory_step_cpu_ms"), torch_line(m, 1)
    rows.append((f"{m.upper()} CPU ms per step (all threads): PyTorch / dlscale", f"{ours:.1f}", f"{theirs:.1f}",
                 theirs / ours, "(steadier under load)"))
for m in ("mlp", "cnn"):
    step, same = med(m, "step_gflops"), med(m, "sgemm_best_same_shapes_gflops")
    rows.append((f"{m.upper()} step GFLOP/s vs best sgemm at its GEMM shapes", f"{step:.1f}", f"{same:.1f}", step / same,
                 ">= 0.5" if m == "mlp" else "-"))
for m in ("mlp", "cnn"):
    ob, dn = med(m, "sgemm_same_shapes_gflops"), med(m, "gemm_backend_same_shapes_gflops")
    rows.append((f"{m.upper()} GEMM shapes: oneDNN (dlscale's) vs OpenBLAS sgemm", f"{dn:.1f}", f"{ob:.1f}", dn / ob, "-"))
for m in ("mlp", "cnn"):
    step, sq = med(m, "step_gflops"), med(m, "sgemm_2048_gflops")
    rows.append((f"{m.upper()} step GFLOP/s vs OpenBLAS sgemm 2048^3", f"{step:.1f}", f"{sq:.1f}", step / sq, "-"))
plain = ld["plain_read_mb_per_s"]
rows.append(("DatasetReader MB/s (shuffled batches) vs read()", f"{ld['reader_shuffled_mb_per_s']:.0f}",
             f"{plain:.0f}", ld["reader_shuffled_mb_per_s"] / plain, "-"))
rows.append(("DatasetReader MB/s (in file order) vs read()", f"{ld['reader_ordered_mb_per_s']:.0f}", f"{plain:.0f}",
             ld["reader_ordered_mb_per_s"] / plain, "-"))
rows.append(("PrefetchLoader MB/s (shuffled) vs read()", f"{ld['prefetch_shuffled_mb_per_s']:.0f}", f"{plain:.0f}",
             ld["prefetch_shuffled_mb_per_s"] / plain, "-"))
for m in ("mlp", "cnn"):
    load, mem = med(m, "loader_step_ms"), med(m, "memory_step_ms")
    rows.append((f"{m.upper()} step ms, real loader vs data in memory", f"{load:.2f}", f"{mem:.2f}", load / mem,
                 "<= 1.05"))
rows.append(("gradient all-reduce ms (CNN, 2 ranks) vs MPI_Allreduce", ar["dlscale bucketed all-reduce (ms)"],
             ar["plain MPI_Allreduce (ms)"], float(ar["ratio dlscale / plain"]), "<= 1.10"))

cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
try:
    import torch
    tv = torch.__version__
except Exception:
    tv = "?"
print(f"machine: {cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}; PyTorch {tv}")
print(f"run: 1 rank x {threads} threads, batch 128, float32, Adam; medians of {repeats} alternating repeats; {secs} s")
print(f"load average (1 min) at start {load0}, at end {load1}"
      + ("  << the machine was busy: trust the ratios, not the rates" if max(float(load0), float(load1)) > 0.5 else ""))
for m in ("mlp", "cnn"):
    print(f"{m.upper()}: {med(m, 'gflop_per_step'):.3f} GFLOP per step (2*M*N*K per GEMM, fwd + dW + dx, no dx for layer 1)")
w = max(len(r[0]) for r in rows)
print(f"\n{'measure':<{w}}  {'dlscale':>9}  {'baseline':>9}  {'ratio':>6}  target")
for name, a, b, ratio, target in rows:
    print(f"{name:<{w}}  {a:>9}  {b:>9}  {ratio:>6.2f}  {target}")
EOF
