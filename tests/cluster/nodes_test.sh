#!/usr/bin/env bash
# The multi-node test cluster is what the other cluster tests take it for:
# nodes with their own hostname, address, /tmp and /dev/shm, a shared
# project folder, MPI between nodes only over the cluster's network, and an
# idempotent start that leaves running daemons alone.
#   nodes_test.sh CLUSTER_DIR DLSCALE
set -euo pipefail
. "$(dirname "$0")/cluster_env.sh" "$@"

n=$(node_count)
((n >= 2)) || fail "the cluster has $n nodes"
declare -A seen_addr
for ((k = 1; k <= n; k++)); do
  [ "$(on_node node$k hostname)" = "node$k" ] || fail "node$k's hostname is $(on_node node$k hostname)"
  addr=$(on_node node$k ip -4 -o addr show dev eth0 | awk '{print $4}')
  [ -n "$addr" ] && [ -z "${seen_addr[$addr]:-}" ] || fail "node$k's address '$addr' is missing or shared"
  seen_addr[$addr]=node$k
  # Node-local storage: what node k writes in /tmp and /dev/shm no other node sees.
  on_node node$k bash -c "echo node$k >/tmp/dlscale-nodes-test-$$ && echo node$k >/dev/shm/dlscale-nodes-test-$$"
done
for ((k = 1; k <= n; k++)); do
  for f in /tmp /dev/shm; do
    [ "$(on_node node$k cat "$f/dlscale-nodes-test-$$")" = "node$k" ] || fail "node$k's $f holds another node's file"
  done
  on_node node$k rm -f /tmp/dlscale-nodes-test-$$ /dev/shm/dlscale-nodes-test-$$
done
[ ! -e /tmp/dlscale-nodes-test-$$ ] || fail "a node's /tmp is this machine's /tmp"
# The shared filesystem: what node 2 writes in the scratch folder, node 1 and this machine read.
on_node node2 bash -c "hostname >shared-file"
[ "$(on_node node1 cat "$scratch/shared-file")" = node2 ] && [ "$(cat shared-file)" = node2 ] ||
  fail "the scratch folder is not shared between the nodes"

# Ranks on two nodes reach each other over TCP on eth0 only: with shared
# memory alone (no tcp) Open MPI cannot connect them, so they are really apart.
"$dlscale" --help >/dev/null
on_node node1 srun --mpi=pmix --nodes=2 --ntasks-per-node=1 "$dlscale" info >info.txt 2>&1 || fail "a 2-node job failed: $(cat info.txt)"
grep -q ' node1 ' info.txt && grep -q ' node2 ' info.txt || fail "dlscale info does not show both nodes: $(cat info.txt)"
if on_node node1 env OMPI_MCA_btl=self,vader srun --mpi=pmix --nodes=2 --ntasks-per-node=1 "$dlscale" train /dev/null \
  >no-tcp.txt 2>&1; then
  fail "ranks on two nodes connected without TCP: the nodes share memory or a network"
fi

# The nodes share this machine's cores: an mpirun over 2 nodes leaves its ranks
# free to run on any core (Open MPI's per-node default bound both to core 0).
on_node node1 mpirun -n 2 --host node1,node2 sh -c 'grep Cpus_allowed_list /proc/self/status' >cpus.txt 2>&1 ||
  fail "a 2-node mpirun failed: $(cat cpus.txt)"
want=$(grep Cpus_allowed_list /proc/self/status)
[ "$(grep -c -x "$want" cpus.txt)" -eq 2 ] || fail "mpirun bound the nodes' ranks to fewer cores than the nodes have ($want): $(cat cpus.txt)"

# start again: idempotent, the running daemons keep their pids.
before=$("$cluster_script" status "$cluster")
"$cluster_script" start --nodes "$n" "$cluster" >/dev/null
after=$("$cluster_script" status "$cluster")
[ "$before" = "$after" ] || fail "start changed a running cluster: $before / $after"
# A different node count for a running cluster is refused, not half-applied.
if "$cluster_script" start --nodes $((n + 1)) "$cluster" >refused.txt 2>&1; then fail "start --nodes $((n + 1)) of a running $n-node cluster succeeded"; fi
grep -q "stop it first" refused.txt || fail "unclear refusal: $(cat refused.txt)"

# A second, small cluster starts beside it and stops leaving nothing: no
# process, namespace link or bridge of its own.
chmod 755 "$scratch"  # munged wants its socket's folders open to all
small=$scratch/c2
"$cluster_script" start --nodes 2 "$small" >/dev/null
bridge=$(sed -n 's/^bridge=//p' "$small/network")
ip link show "$bridge" >/dev/null || fail "the second cluster has no bridge $bridge"
SLURM_CONF=$small/slurm.conf "$cluster_script" exec "$small" node2 hostname | grep -qx node2 || fail "the second cluster's node2 does not answer"
"$cluster_script" stop "$small" >/dev/null
if ip link show "$bridge" >/dev/null 2>&1; then fail "stop left the bridge $bridge"; fi
for p in $(pgrep -f -- "$small/" || true); do
  state=$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null || echo gone)
  [ "$state" = Z ] || [ "$state" = gone ] || fail "stop left a process: $(tr '\0' ' ' <"/proc/$p/cmdline")"
done
"$cluster_script" status "$cluster" >/dev/null || fail "stopping the second cluster touched the first"
echo "nodes: $n, each its own hostname, address, /tmp and /dev/shm; MPI between nodes over TCP only"
