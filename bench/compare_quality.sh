#!/usr/bin/env bash
# Issue #18's quality comparison on the CPU: examples/text/transformer.ini
# (4 epochs, validation loss per token) and, with MODELS="transformer resnet",
# examples/fashion-mnist/resnet.ini (20 epochs, test accuracy: hours on 2
# cores), each trained in full by `dlscale train` (1 rank x THREADS threads)
# and by bench/pytorch_models.py on the same data in the same order
# (--shuffle never on dlscale's side, file order on PyTorch's), batch,
# learning-rate schedule, steps and initial distributions (--init dlscale).
# The GPU runs the same pairs in minutes: SECTIONS=quality bench/gpu_check.sh.
# Uses the existing build and the examples' data (examples/text/run.sh and
# examples/fashion-mnist/run.sh make it); builds nothing.
#
#   bench/compare_quality.sh          # the transformer: about 30-40 minutes on 2 cores
#
# Environment: DLSCALE_BUILD (build), THREADS (2), MODELS (transformer),
# KEEP (folder for the logs and run directories; default a temporary one).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${DLSCALE_BUILD:-build}
threads=${THREADS:-2}
work=${KEEP:-$(mktemp -d)}
[ -n "${KEEP:-}" ] || trap 'rm -rf "$work"' EXIT
mkdir -p "$work"
py=/usr/bin/python3  # Debian's python3-torch and h5py

# row MODEL METRIC DLSCALE_VALUE PYTORCH_VALUE
row() { printf '%-28s %-18s %10s %10s %+10.4f\n' "$1" "$2" "$3" "$4" "$("$py" -c "print($3 - $4)")"; }
summary_value() { "$py" -c 'import json,sys; print(f"{json.load(open(sys.argv[1]))[sys.argv[2]]:.4f}")' "$1" "$2"; }

results=()
for model in ${MODELS:-transformer}; do
  case $model in
    transformer) config=examples/text/transformer.ini train=data/text/train eval=data/text/val epochs=4
      dl_eval=(--validation-data "$eval" --test-data "") dl_key=validation_loss py_key=eval_loss metric="loss/token" ;;
    resnet) config=examples/fashion-mnist/resnet.ini train=data/fashion-mnist/train eval=data/fashion-mnist/test epochs=20
      dl_eval=(--validation-data "" --test-data "$eval") dl_key=test_accuracy py_key=eval_accuracy metric="test accuracy" ;;
    *) echo "compare_quality.sh: unknown model '$model' (transformer, resnet)" >&2; exit 2 ;;
  esac
  [ -d "$train" ] && [ -d "$eval" ] || { echo "compare_quality.sh: no $train or $eval: run the example's run.sh first" >&2; exit 1; }
  "$build/launch/dlscale" train "$config" --train-data "$train" "${dl_eval[@]}" --shuffle never \
    --threads "$threads" --output "$work/$model-dlscale" >"$work/$model-dlscale.log" 2>&1
  OMP_WAIT_POLICY=PASSIVE "$py" bench/pytorch_models.py --model "$config" --data "$train" --eval "$eval" \
    --train-epochs "$epochs" --threads "$threads" --device cpu >"$work/$model-pytorch.log" 2>&1
  results+=("$(row "$model.ini, $epochs epochs" "$metric" "$(summary_value "$work/$model-dlscale/summary.json" "$dl_key")" \
    "$(sed -n "s/^$py_key //p" "$work/$model-pytorch.log")")")
done
printf '%-28s %-18s %10s %10s %10s\n' "model" "metric" "dlscale" "PyTorch" "difference"
printf '%s\n' "${results[@]}"
