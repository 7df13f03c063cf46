#!/usr/bin/env bash
# Placement-independent determinism (issue #15, item 2): in deterministic
# mode 4 ranks placed 1x4, 2x2 and 4x1 (nodes x ranks) end with the same
# model.h5, byte for byte. MPI picks its all-reduce algorithm (and so the
# order of the additions) by topology and size; the 2x2 run is also told to
# use another one (ring instead of the recursive doubling Open MPI's tuned and libnbc
# components pick), as an MPI tuned for the fabric would, so only a
# reduction order dlscale fixes itself passes.
#   placement_determinism_test.sh CLUSTER_DIR DLSCALE
set -euo pipefail
. "$(dirname "$0")/cluster_env.sh" "$@"
(($(node_count) >= 4)) || fail "the 4x1 placement needs 4 nodes; the cluster has $(node_count)"
src=/usr/share/datasets/fashion-mnist
"$dlscale" shard --images "$src/t10k-images-idx3-ubyte.gz" --labels "$src/t10k-labels-idx1-ubyte.gz" \
  --output data --shards 4 >/dev/null
sed -e "s#data/fashion-mnist/train#$scratch/data#" -e '/^validation-data/d' -e '/^test-data/d' \
  -e 's/^max-epochs = .*/max-epochs = 1/' "$project/examples/fashion-mnist/cnn.ini" >cnn.ini
echo "deterministic = true" >>cnn.ini

for placement in 1x4 2x2 4x1; do
  nodes=${placement%x*} per_node=${placement#*x}
  env=()
  [ "$placement" = 2x2 ] && env=(OMPI_MCA_coll_tuned_use_dynamic_rules=1 OMPI_MCA_coll_tuned_allreduce_algorithm=4
    OMPI_MCA_coll_libnbc_iallreduce_algorithm=1)
  on_node node1 env "${env[@]}" srun --mpi=pmix --nodes="$nodes" --ntasks-per-node="$per_node" \
    "$dlscale" train cnn.ini --threads 1 --output "run-$placement" >"train-$placement.txt" 2>&1 ||
    fail "training placed $placement failed: $(tail -n 20 "train-$placement.txt")"
  [ "$(rank_table "run-$placement/log.txt" | awk '{print $2}' | sort -u | wc -l)" -eq "$nodes" ] ||
    fail "the $placement run is not on $nodes nodes: $(rank_table "run-$placement/log.txt")"
done
for placement in 2x2 4x1; do
  cmp -s run-1x4/model.h5 "run-$placement/model.h5" ||
    fail "model.h5 placed $placement differs from 1x4 (final losses: $(json_value run-1x4 final_minibatch_loss) vs $(json_value "run-$placement" final_minibatch_loss))"
done
echo "4 ranks placed 1x4, 2x2 (another MPI all-reduce algorithm) and 4x1: model.h5 identical, final loss $(json_value run-1x4 final_minibatch_loss)"
