#!/usr/bin/env bash
# Measured scaling and the scaling model's check (issue #15 items 6 and 7;
# docs/scaling.md). For each network, node count, link limit and bucket size:
# step time, all-reduce time and the share of it hidden behind backward
# (bench/step_profile, one JSON file per run), then bench/scaling_model's
# predicted-against-measured table over all of them.
#   bench/multinode_scaling.sh [OUT_DIR]          (default: a new folder under /tmp)
# Settings (environment): NODES="1 2 3" BUCKETS="0.25,4,25" (MiB)
#   REPS (steps per configuration, in step_profile's 4 rounds; default 40 for the CNN, 16 for the VGG-like
#   network, whose steps take seconds at 1 Gbit/s) CNN_BATCH=64 VGG_BATCH=16 RATES="1gbit 5gbit" BUILD=build NETWORKS="cnn vgg"
#   CLUSTER_DIR=DIR: run on the namespace cluster started with
#     slurm/test-cluster.sh start --nodes 3 DIR (one rank per node, MPI over
#     TCP on eth0, each node's eth0 limited with tc tbf to each of RATES).
#   Without CLUSTER_DIR: on this host, `mpirun -n N` ranks stand for
#   N nodes, shared memory instead of links, no tc (RATES is ignored).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build}
# On the cluster rank 0 writes the profiles on node1: OUT_DIR must be on the
# shared project folder there, not a node's own /tmp.
if [ -n "${CLUSTER_DIR:-}" ]; then
  out=${1:-$build/scaling-$(date +%Y%m%d-%H%M%S)}
else
  out=${1:-$(mktemp -d /tmp/dlscale-scaling-XXXXXX)}
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
nodes=${NODES:-1 2 3} buckets=${BUCKETS:-0.25,4,25}
for bin in step_profile scaling_model; do
  [ -x "$build/bench/$bin" ] || { echo "build $bin first: cmake --build $build --target step_profile scaling_model" >&2; exit 1; }
done
if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
export OMP_NUM_THREADS=1

# network: config, local batch, largest all-reduce of the alpha-beta fit (MiB), steps
networks=("cnn examples/fashion-mnist/cnn.ini ${CNN_BATCH:-64} 16 ${REPS:-40}"
          "vgg bench/models/vgg_like.ini ${VGG_BATCH:-16} 128 ${REPS:-16}")
[ -n "${NETWORKS:-}" ] && mapfile -t networks < <(printf '%s\n' "${networks[@]}" | grep -E "^(${NETWORKS// /|}) ")
# glibc keeps freed memory mapped: on this project's VMs (which report freed
# pages to the host) MPI's per-call temporary buffers of tens of MB otherwise
# cost seconds of page faults. On one host, shared-memory messages are copied
# through the shared segment, as a network would carry them, not with CMA.
malloc_opts=(-x MALLOC_MMAP_MAX_=0 -x MALLOC_TRIM_THRESHOLD_=8589934592)
local_mpi_opts=("${malloc_opts[@]}" --mca btl_vader_single_copy_mechanism none --oversubscribe --bind-to none)

# The multi-node namespace cluster (slurm/test-cluster.sh start --nodes N
# CLUSTER_DIR): commands run inside node NAME; nodes are node1..nodeN.
cluster_exec() {  # cluster_exec NODE COMMAND...
  slurm/test-cluster.sh exec "$CLUSTER_DIR" "$@"
}
node_list() { local n=$1 i s=""; for ((i = 1; i <= n; i++)); do s+="${s:+,}node$i"; done; echo "$s"; }

# limit_links N RATE: every node's eth0 sends at most RATE (tbf; "none" lifts it).
limit_links() {
  local n=$1 rate=$2 i
  [ -n "${CLUSTER_DIR:-}" ] || return 0
  for ((i = 1; i <= n; i++)); do
    slurm/test-cluster.sh link "$CLUSTER_DIR" "node$i" "$rate"  # tbf on both ends of node i's link
  done
}

# profile N OUTFILE CONFIG BATCH MAX_MIB REPS: one step_profile run on N nodes (ranks).
profile() {
  local n=$1 file=$2 config=$3 batch=$4 max_mib=$5 reps=$6
  local args=("$config" --batch "$batch" --reps "$reps" --buckets "$buckets" --max-allreduce-mib "$max_mib" --output "$file")
  if [ -n "${CLUSTER_DIR:-}" ]; then
    cluster_exec node1 mpirun -n "$n" --host "$(node_list "$n")" --mca btl self,tcp --mca btl_tcp_if_include eth0 \
      --mca oob_tcp_if_include eth0 -x OMP_NUM_THREADS "${malloc_opts[@]}" "$(cd "$build" && pwd)/bench/step_profile" "${args[@]}"
  else
    mpirun -n "$n" "${local_mpi_opts[@]}" "$build/bench/step_profile" "${args[@]}"
  fi
}

rates=none
[ -n "${CLUSTER_DIR:-}" ] && rates=${RATES:-1gbit 5gbit}
max_nodes=$(echo $nodes | tr ' ' '\n' | sort -n | tail -1)
trap 'limit_links "$max_nodes" none' EXIT
echo "writing to $out (load before: $(cut -d' ' -f1-3 /proc/loadavg))"
for net in "${networks[@]}"; do
  read -r name config batch max_mib reps <<< "$net"
  for n in $nodes; do
    for rate in $rates; do
      [ "$n" -eq 1 ] && [ "$rate" != "$(set -- $rates; echo "$1")" ] && continue  # one node: no link to limit
      limit_links "$n" "$rate"
      profile "$n" "$out/$name-n$n-$rate.json" "$config" "$batch" "$max_mib" "$reps"
    done
  done
done
limit_links "$max_nodes" none
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
"$build/bench/scaling_model" measured "$out"/*.json | tee "$out/model.md"
