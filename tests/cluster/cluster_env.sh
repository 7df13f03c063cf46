# Sourced by the tests on the multi-node test cluster (slurm/test-cluster.sh
# start --nodes N, started by the CTest fixture in this folder):
#   . cluster_env.sh CLUSTER_DIR DLSCALE
# The scratch folder is on the cluster's shared filesystem (CLUSTER_DIR/tmp,
# set as TMPDIR by CTest), since every node has a /tmp of its own.
cluster=$(cd "$1" && pwd)
dlscale=$(realpath "$2")
project=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cluster_script=$project/slurm/test-cluster.sh
export SLURM_CONF=$cluster/slurm.conf
# Slurm's ring fence for the tests' own srun lines, as the job scripts use (docs/running.md:
# Slurm 22.05's tree fence does not span the nodes, so MPI_Init is no barrier).
export SLURM_PMIX_FENCE=ring
if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
# Inside the cluster's folder, which every node shares (also when the
# checkout itself is under /tmp: slurm/test-cluster-nodes.sh binds it into
# each node's /tmp); the machine's own /tmp is not shared.
case $(realpath -m "${TMPDIR:-/tmp}")/ in
  "$(realpath "$cluster")"/*) ;;
  *) echo "cluster tests need TMPDIR inside $cluster, which every node shares (CTest sets it)" >&2; exit 1 ;;
esac
mkdir -p "$TMPDIR"
. "$project/tests/scratch.sh"

fail() { echo "FAIL: $*" >&2; exit 1; }
on_node() { "$cluster_script" exec "$cluster" "$@"; }
node_count() { cat "$cluster/nodes"; }

# Brings node $1 back after a test took it down: its link up, its namespace
# and slurmd started again (both idempotent), Slurm told so; returns once it
# runs a job step (non-zero after 120 s). Tests that take nodes down call it
# also when they fail, so that a failure does not leave the next tests a
# cluster with a node down.
bring_back_node() {
  "$cluster_script" link "$cluster" "$1" up
  "$cluster_script" restart-node "$cluster" "$1"
  scontrol update nodename="$1" state=resume >/dev/null 2>&1 || true
  local begin=$SECONDS
  until on_node node1 srun --quiet --nodelist="$1" --time=1 true 2>/dev/null; do
    ((SECONDS - begin < 120)) || return 1
    sleep 2
  done
}

# Fashion-MNIST (Debian's dataset-fashion-mnist) as shards in $scratch/data,
# and the example CNN reading them.
fashion_mnist() {
  local src=/usr/share/datasets/fashion-mnist split
  for split in train:train t10k:test; do
    "$dlscale" shard --images "$src/${split%%:*}-images-idx3-ubyte.gz" --labels "$src/${split%%:*}-labels-idx1-ubyte.gz" \
      --output "$scratch/data/${split##*:}" --shards 4 >/dev/null
  done
  sed "s#data/fashion-mnist#$scratch/data#" "$project/examples/fashion-mnist/cnn.ini" >"$scratch/cnn.ini"
}

# A value from a run's summary.json: json_value RUN KEY
json_value() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]+"/summary.json"))[sys.argv[2]])' "$1" "$2"; }

# Profiles of the test: [cluster] submits to the test cluster, jobs in $scratch/jobs.
use_cluster_profile() {
  printf 'default = cluster\n[cluster]\ntype = slurm\npartition = debug\ntime = 20\njob-root = %s\n' \
    "$scratch/jobs" >"$scratch/profiles.ini"
  export DLSCALE_PROFILES=$scratch/profiles.ini
  unset DLSCALE_PROFILE
}

# dlscale submit ARGS...; prints the job folder's name.
submit_job() {
  local out
  out=$("$dlscale" submit "$@") || fail "dlscale submit $*: $out"
  awk 'NR == 1 {print $2}' <<<"$out"
}

# Waits (at most $2 s, default 400) until job $1 ended; prints its state.
wait_job() {
  local job=$1 limit=${2:-400} begin=$SECONDS state
  while ((SECONDS - begin < limit)); do
    state=$("$dlscale" jobs --json "$job" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("state",""))')
    case $state in done | failed | cancelled) echo "$state"; return 0 ;; esac
    sleep 1
  done
  echo "timeout($state)"
}

# The rank table rank 0 logs, as "RANK HOST LOCAL" lines: rank_table LOG
# [last]: the first start's, or with `last` the last start's (a requeued
# job's log holds one per start).
rank_table() {
  awk -v which="${2:-first}" '
    /^ +rank +host +local/ {if (which == "first" && n) exit; on = 1; n = 0; delete t; next}
    on && $1 ~ /^[0-9]+$/ {t[++n] = $1 " " $2 " " $3; next}
    {on = 0}
    END {for (i = 1; i <= n; i++) print t[i]}' "$1"
}

# pids of the processes in node $1 whose command line contains $2 (nodes
# share this machine's pid space: a process is node K's by its network
# namespace, the node holder's).
node_pids() {
  local holder p
  [ -n "$1" ] || { echo "node_pids: no node named" >&2; return 1; }
  holder=$(cat "$cluster/run/holder-$1.pid") || return 1
  for p in /proc/[0-9]*; do
    [[ $p/ns/net -ef /proc/$holder/ns/net ]] || continue
    [[ $(tr '\0' ' ' 2>/dev/null <"$p/cmdline") == *"$2"* ]] && echo "${p#/proc/}"
  done
  return 0
}
