#!/usr/bin/env bash
# ResNet-20 and the byte-level transformer against PyTorch (issue #18 item 5,
# throughput): examples/fashion-mnist/resnet.ini and examples/text/transformer.ini
# trained by `dlscale train` and by bench/pytorch_models.py (the same layers,
# parameter count, optimizer, batch, augmentation, data and data order),
# alternating REPEATS times at 1 rank x THREADS threads; prints one table of
# medians. Uses the existing build; builds nothing.
#
#   bench/compare_models.sh        # about 3-6 minutes on 2 cores
#
# Environment: MODELS ("resnet transformer"), DLSCALE_BUILD (build), THREADS (2),
# REPEATS (3), WARMUP (8),
# RESNET_STEPS (40), TRANSFORMER_STEPS (40), PASSIVE (1: also time PyTorch
# with OMP_WAIT_POLICY=PASSIVE, the setting dlscale's binary gives itself;
# 0: skip), KEEP (folder to keep the raw outputs and run directories in;
# default a temporary folder, removed).
#
# What each side runs, WARMUP + STEPS steps on a data set of exactly that
# many batches (made once under data/compare/, ignored by git):
#  - Fashion-MNIST: the first (WARMUP+RESNET_STEPS)*128 training images of
#    Debian's dataset-fashion-mnist, sharded with `dlscale shard`;
#  - text: the first (WARMUP+TRANSFORMER_STEPS)*32 windows of 128 bytes of the
#    fortunes' plain-text files, concatenated in the order examples/text/run.sh
#    gives them, sharded with `dlscale shard --text --context 128`.
#  dlscale: `dlscale train CONFIG --train-data SUBSET --max-epochs 1
#    --shuffle never --threads THREADS` with no validation or test data; the
#    figure is the samples of steps WARMUP+1 ... last over the time between
#    their metrics.jsonl records (the run logs every WARMUP iterations), so
#    start-up and the first steps are left out as on PyTorch's side; the
#    whole loop's summary.json samples_per_second is printed beside it.
#  PyTorch: bench/pytorch_models.py on the same shards (h5py), batches in
#    file order (= --shuffle never), WARMUP untimed steps, then STEPS timed
#    ones, torch.set_num_threads(THREADS), its default OpenMP settings; with
#    PASSIVE=1 a second PyTorch run per repeat under OMP_WAIT_POLICY=PASSIVE
#    (on 2 cores Debian's PyTorch has two thread pools, libgomp's and
#    OpenBLAS's, and gomp's spinning workers slow OpenBLAS's GEMMs).
# Both sides use the config's optimizer, learning-rate schedule (the cosine
# over one epoch of the subset, as --max-epochs 1), L2 and gradient clipping,
# and the ResNet's crop + flip augmentation.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${DLSCALE_BUILD:-build}
threads=${THREADS:-2} repeats=${REPEATS:-3} warmup=${WARMUP:-8}
resnet_steps=${RESNET_STEPS:-40} transformer_steps=${TRANSFORMER_STEPS:-40} passive=${PASSIVE:-1}
models=${MODELS:-resnet transformer}
py=/usr/bin/python3
src=/usr/share/datasets/fashion-mnist
dl=$build/launch/dlscale

"$py" -c "import torch, h5py" 2>/dev/null ||
  { echo "bench/compare_models.sh needs python3-torch and python3-h5py (apt-get install python3-torch python3-h5py)" >&2; exit 1; }
[ -f "$src/train-images-idx3-ubyte.gz" ] ||
  { echo "bench/compare_models.sh needs dataset-fashion-mnist (apt-get install dataset-fashion-mnist)" >&2; exit 1; }
[ -d /usr/share/games/fortunes ] || { echo "bench/compare_models.sh needs fortunes (apt-get install fortunes)" >&2; exit 1; }
[ -x "$dl" ] || { echo "bench/compare_models.sh: no $dl (build dlscale first, or set DLSCALE_BUILD)" >&2; exit 1; }
if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi

out=${KEEP:-$(mktemp -d)}
mkdir -p "$out"
[ -n "${KEEP:-}" ] || trap 'rm -rf "$out"' EXIT

# The data subsets: made again only when missing or of another size.
n_images=$(( (warmup + resnet_steps) * 128 )) n_windows=$(( (warmup + transformer_steps) * 32 ))
images=data/compare/fashion-mnist-$n_images text=data/compare/fortunes-$n_windows
if ! grep -qs "\"num_samples\": $n_images," "$images/index.json"; then
  "$py" - "$src" "$n_images" "$out" <<'EOF'
import gzip, sys
import numpy as np
src, n, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def idx(path):
    d = gzip.open(path).read()
    dims = d[3]
    shape = [int.from_bytes(d[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(d, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)
np.save(f"{out}/images.npy", np.ascontiguousarray(idx(f"{src}/train-images-idx3-ubyte.gz")[:n, None]))
np.save(f"{out}/labels.npy", idx(f"{src}/train-labels-idx1-ubyte.gz")[:n].astype(np.int64))
EOF
  "$dl" shard --images "$out/images.npy" --labels "$out/labels.npy" --output "$images" --overwrite >/dev/null
  rm -f "$out/images.npy" "$out/labels.npy"
fi
if ! grep -qs "\"num_samples\": $n_windows," "$text/index.json"; then
  files=()
  for f in /usr/share/games/fortunes/*; do
    case "$f" in *.dat | *.u8) ;; *) [ -f "$f" ] && files+=("$f") ;; esac
  done
  # (cat in a process substitution: its SIGPIPE when head stops would fail the pipeline under pipefail)
  head -c $(( n_windows * 128 + 1 )) < <(cat "${files[@]}") >"$out/text.txt"
  "$dl" shard --text "$out/text.txt" --context 128 --output "$text" --overwrite >/dev/null
  rm -f "$out/text.txt"
fi

# The CPU time other processes took during each run: all CPUs' busy time
# (/proc/stat) less the run's own (bash's `time`), in cores; 0 on a quiet machine.
tick=$(getconf CLK_TCK)
busy() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat; }
timed() {  # timed NAME COMMAND...: stdout to NAME.txt, stderr to NAME.log, "wall own_cpu other_cores" to NAME.cpu
  local name=$1 b0 b1 t
  shift
  b0=$(busy)
  t=$( { TIMEFORMAT='%R %U %S'; time "$@" >"$name.txt" 2>"$name.log"; } 2>&1 ) ||
    { cat "$name.log" >&2; echo "bench/compare_models.sh: failed: $*" >&2; exit 1; }
  b1=$(busy)
  echo "$t" | awk -v b="$(( b1 - b0 ))" -v tick="$tick" \
    '{ own = $2 + $3; other = b / tick - own; printf "%s %.2f %.3f\n", $1, own, (other > 0 ? other : 0) / $1 }' >"$name.cpu"
}

load_start=$(cut -d' ' -f1 /proc/loadavg)
t_start=$(date +%s)
for r in $(seq "$repeats"); do
  for model in $models; do
    if [ "$model" = resnet ]; then
      config=examples/fashion-mnist/resnet.ini data=$images steps=$resnet_steps
    else
      config=examples/text/transformer.ini data=$text steps=$transformer_steps
    fi
    echo "$model repeat $r/$repeats: dlscale ..." >&2
    timed "$out/$model-dlscale-$r" "$dl" train "$config" --train-data "$data" --validation-data "" --test-data "" \
      --max-epochs 1 --shuffle never --threads "$threads" --verbose-frequency "$warmup" \
      --validation-frequency 1000000 --output "$out/$model-dlscale-$r" --overwrite true
    echo "$model repeat $r/$repeats: PyTorch ..." >&2
    timed "$out/$model-pytorch-$r" "$py" bench/pytorch_models.py --model "$config" --data "$data" \
      --threads "$threads" --warmup "$warmup" --steps "$steps" --epochs 1
    if [ "$passive" = 1 ]; then
      echo "$model repeat $r/$repeats: PyTorch, OMP_WAIT_POLICY=PASSIVE ..." >&2
      timed "$out/$model-passive-$r" env OMP_WAIT_POLICY=PASSIVE "$py" bench/pytorch_models.py --model "$config" \
        --data "$data" --threads "$threads" --warmup "$warmup" --steps "$steps" --epochs 1
    fi
  done
done
load_end=$(cut -d' ' -f1 /proc/loadavg)

"$py" - "$out" "$repeats" "$threads" "$warmup" "$load_start" "$load_end" "$(( $(date +%s) - t_start ))" "$passive" "$models" <<'EOF'
import glob, json, os, platform, re, statistics, sys
out, repeats, threads, warmup = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
load0, load1, secs, passive = sys.argv[5], sys.argv[6], sys.argv[7], sys.argv[8] == "1"
models = sys.argv[9].split()
batch = {"resnet": 128, "transformer": 32}
tokens = {"resnet": 0, "transformer": 128}

def dlscale(model, r):
    run = f"{out}/{model}-dlscale-{r}"
    its = {}
    for line in open(f"{run}/metrics.jsonl"):
        m = json.loads(line)
        if m.get("type") == "iteration":
            its[m["iteration"]] = m["time_s"]
    last = max(its)
    steps = last - warmup
    if warmup not in its or steps < 1:
        sys.exit(f"compare_models.sh: {run}/metrics.jsonl has no record of iteration {warmup} before the last")
    rate = steps * batch[model] / (its[last] - its[warmup])
    # CPU time per step (all threads) from telemetry windows after the warm-up: utilization x threads x step time.
    cpu, n = 0.0, 0
    prev = None
    for line in open(f"{run}/telemetry.jsonl"):
        t = json.loads(line)
        it, k = t["iteration"], t["ranks"][0]
        if prev is not None and prev >= warmup:
            cpu += k["utilization_pct"] / 100 * threads * k["step_time_s"] * (it - prev)
            n += it - prev
        prev = it
    summary = json.load(open(f"{run}/summary.json"))
    learn = int(re.search(r"(\d+) learnables", open(f"{run}/log.txt").read()).group(1))
    return {"rate": rate, "loop": summary["samples_per_second"], "cpu_ms": cpu / n * 1e3 if n else float("nan"),
            "params": learn, "steps": steps}

def pytorch(model, r, side="pytorch"):
    d = {}
    for line in open(f"{out}/{model}-{side}-{r}.txt"):
        k, v = line.split()
        d[k] = float(v)
    return d

cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
import torch
print(f"machine: {cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}; PyTorch {torch.__version__}")
print(f"run: 1 rank x {threads} threads, float32; medians of {repeats} alternating repeats; {secs} s")
busiest = max(float(open(f).read().split()[2]) for f in glob.glob(f"{out}/*-[0-9]*.cpu"))
print(f"load average (1 min) at start {load0}, at end {load1} (the end includes this benchmark's own threads); "
      f"other processes took up to {busiest:.2f} cores during a run"
      + ("  << the machine was busy: PyTorch's OpenMP threads spin-wait and lose far more than dlscale under load,"
         " so even the ratios overstate dlscale; rerun on a quiet machine" if busiest > 0.1 else ""))
rows, notes = [], []
for model in models:
    d = [dlscale(model, r) for r in range(1, repeats + 1)]
    p = [pytorch(model, r) for r in range(1, repeats + 1)]
    if {x["params"] for x in d} != {int(x["params"]) for x in p}:
        sys.exit(f"compare_models.sh: {model}: dlscale has {d[0]['params']} learnables, PyTorch {int(p[0]['params'])}")
    ours, theirs = statistics.median(x["rate"] for x in d), statistics.median(x["samples_per_s"] for x in p)
    per = ", ".join(f"{a['rate'] / b['samples_per_s']:.2f}" for a, b in zip(d, p))
    other = lambda side: ", ".join(open(f"{out}/{model}-{side}-{r}.cpu").read().split()[2]
                                   for r in range(1, repeats + 1))
    notes.append(f"{model}: {d[0]['params']} parameters both sides, batch {batch[model]}, {d[0]['steps']} timed steps "
                 f"after {warmup}; per repeat: ratio {per}; cores other processes took during dlscale's runs "
                 f"{other('dlscale')}, during PyTorch's {other('pytorch')}"
                 + (f", PASSIVE's {other('passive')}" if passive else "")
                 + f"; dlscale whole-loop samples/s (summary.json, first steps included) "
                 f"{statistics.median(x['loop'] for x in d):.1f}")
    rows.append((f"{model} samples/s", f"{ours:.1f}", f"{theirs:.1f}", ours / theirs, ">= 1.5"))
    if tokens[model]:
        rows.append((f"{model} tokens/s", f"{ours * tokens[model]:.0f}", f"{theirs * tokens[model]:.0f}", ours / theirs, "-"))
    if passive:
        q = [pytorch(model, r, "passive") for r in range(1, repeats + 1)]
        theirs_q = statistics.median(x["samples_per_s"] for x in q)
        rows.append((f"{model} samples/s vs PyTorch OMP_WAIT_POLICY=PASSIVE", f"{ours:.1f}", f"{theirs_q:.1f}",
                     ours / theirs_q, ">= 1.5"))
    oc, tc = statistics.median(x["cpu_ms"] for x in d), statistics.median(x["cpu_ms_per_step"] for x in p)
    rows.append((f"{model} CPU ms/step (all threads), PyTorch/dlscale", f"{oc:.0f}", f"{tc:.0f}", tc / oc, "-"))
w = max(len(r[0]) for r in rows)
print(f"\n{'measure':<{w}}  {'dlscale':>9}  {'PyTorch':>9}  {'ratio':>6}  target")
for name, a, b, ratio, target in rows:
    print(f"{name:<{w}}  {a:>9}  {b:>9}  {ratio:>6.2f}  {target}")
print()
for n in notes:
    print(n)
EOF
