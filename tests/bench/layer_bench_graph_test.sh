#!/usr/bin/env bash
# bench/layer_bench profiles the layers of the example CNN (a blocked
# convolution output into batch norm and, plain, into max pooling), ResNet (input=, add,
# relus fused into batch norm) and transformer (token ids into the
# embedding) as Network builds them: one row per config line, every layer
# timed except the sums and the fused relus, which say so. No timing is asserted.
#   layer_bench_graph_test.sh LAYER_BENCH SOURCE_DIR
set -euo pipefail
bench=$1 src=$2
. "$src/tests/scratch.sh"
for config in examples/fashion-mnist/cnn.ini examples/fashion-mnist/resnet.ini examples/text/transformer.ini; do
  "$bench" "$src/$config" 2 1 1 > out.txt
  lines=$(grep -c '^layer = ' "$src/$config")
  rows=$(grep -cE '^[0-9]+ ' out.txt)
  [ "$rows" -eq $((lines - 1)) ] || { cat out.txt; echo "$config: $rows rows for $lines layers (all but softmax)" >&2; exit 1; }
  adds=$(grep -cE '^layer = add ' "$src/$config" || true)
  [ "$(grep -c '(an elementwise sum)' out.txt)" -eq "$adds" ] || { cat out.txt; echo "$config: every add says it is a sum" >&2; exit 1; }
  timed=$(grep -cE '^[0-9]+ .* [0-9]+\.[0-9]{3} +[0-9]+\.[0-9]{3} +[0-9]+\.[0-9]{3} +[0-9]+\.[0-9]{3}$' out.txt)
  fused=$(grep -c '(fused into the layer before)' out.txt || true)  # grep -c exits 1 on 0
  [ $((timed + fused + adds)) -eq "$rows" ] || { cat out.txt; echo "$config: a row is neither timed, fused nor a sum" >&2; exit 1; }
  grep -q '^total ' out.txt
  [ "$config" = examples/text/transformer.ini ] || [ "$fused" -gt 0 ] || { echo "$config: no relu fused into batch norm" >&2; exit 1; }
done
[ "$fused" -eq 0 ] || { echo "the transformer has no batch norm to fuse a relu into" >&2; exit 1; }
echo "layer_bench: ResNet and transformer rows as expected"
