#!/usr/bin/env bash
# A Slurm test cluster on this machine for dlscale's end-to-end tests.
#   slurm/test-cluster.sh start [--nodes N] [DIR]   (DIR: build/slurm-cluster of this checkout)
#   slurm/test-cluster.sh stop|status [DIR]
# start brings up munged, slurmctld and slurmd (Debian's munge and slurm-wlm)
# from nothing, with every file they use (config, key, sockets, state, spool,
# logs, pid files) under DIR and ports of DIR's own, so it never touches a
# system Slurm or another test cluster. It is idempotent: what already runs is
# left alone. stop ends only what DIR's pid files name. start and status
# print the line that points Slurm's commands at the cluster:
#   export SLURM_CONF=DIR/slurm.conf
# Without --nodes the one node is this machine. With --nodes N (2 or more)
# the nodes node1..nodeN are Linux namespaces (slurm/test-cluster-nodes.sh):
# their own hostname, address on a private bridge, /tmp and /dev/shm, Open
# MPI over TCP between them, one slurmd each; slurmctld and munged stay in
# this machine's namespaces, so a node can fail without them. DIR, and the
# project around it, are the nodes' shared filesystem.
# On such a cluster:
#   slurm/test-cluster.sh exec DIR NODE CMD...     run CMD in NODE (from this folder)
#   slurm/test-cluster.sh kill-node DIR NODE       SIGKILL every process of NODE
#   slurm/test-cluster.sh restart-node DIR NODE    start NODE's slurmd again
#   slurm/test-cluster.sh link DIR NODE up|down|RATE|none
#                                                  cut or restore NODE's link, or
#                                                  limit it (tc tbf, e.g. 1gbit)
set -euo pipefail

usage() {
  sed -n '3,4p;19,24p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
(($# >= 1)) || usage
action=$1
shift
nodes_wanted=0
if [ "$action" = start ] && [ "${1:-}" = --nodes ]; then
  [[ ${2:-} =~ ^[0-9]+$ ]] && (($2 >= 2 && $2 <= 16)) || { echo "test-cluster: --nodes takes 2 to 16" >&2; exit 2; }
  nodes_wanted=$2
  shift 2
fi
case $action in
  start | stop | status) (($# <= 1)) || usage ;;
  exec | kill-node | restart-node | link) (($# >= 2)) || usage ;;
  *) usage ;;
esac
dir=${1:-$(cd "$(dirname "$0")/.." && pwd)/build/slurm-cluster}
(($# > 0)) && shift
[ "$action" = start ] && mkdir -p "$dir"
[ -d "$dir" ] || { echo "test-cluster: no cluster folder $dir" >&2; [ "$action" = stop ] && exit 0; exit 1; }
dir=$(cd "$dir" && pwd)
conf=$dir/slurm.conf
export SLURM_CONF=$conf
node=$(hostname -s)
# Unix socket paths are limited to 107 bytes.
((${#dir} < 80)) || { echo "test-cluster: folder path too long for munge's socket: $dir" >&2; exit 1; }
. "$(dirname "$0")/test-cluster-nodes.sh"
network_names

# The pid in a daemon's pid file, printed only while that process is alive and
# is one of ours (its command line names this folder), so a reused pid of an
# unrelated process is never reported or killed.
live_pid() {
  local file=$dir/run/$1.pid pid
  [ -s "$file" ] || return 1
  pid=$(<"$file")
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  [ -r "/proc/$pid/cmdline" ] && [[ $(tr '\0' ' ' <"/proc/$pid/cmdline") == *"$dir/"* ]] || return 1
  echo "$pid"
}

# Ports of this folder's own (from a checksum of its path) so two test
# clusters, or a system Slurm on 6817/6818, never collide.
ports() {
  local sum
  sum=$(printf '%s' "$dir" | cksum | cut -d' ' -f1)
  ctld_port=$((20000 + (sum % 4000) * 2))
  slurmd_port=$((ctld_port + 1))
}

write_config() {
  local nodes=$1 controller=$node per_node="" slurmd_timeout=60 message_timeout=10 k
  ports
  if ((nodes > 0)); then
    # Slurm marks a silent node DOWN after SlurmdTimeout: short, so a test's
    # node failure ends its job in seconds, long enough for a busy machine.
    controller="$node($controller_addr)" per_node=-%n slurmd_timeout=10 message_timeout=5
  fi
  : >"$dir/etc/plugstack.conf"
  cat >"$conf.tmp" <<EOF
# Written by slurm/test-cluster.sh: a test cluster under $dir
ClusterName=dlscale-test
SlurmctldHost=$controller
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# A short credential lifetime lets a requeued job start again within seconds.
AuthInfo=socket=$dir/munge/munge.socket,cred_expire=10
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/slurmd-%n
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd$per_node.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd$per_node.log
PlugStackConfig=$dir/etc/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$dir/log/jobcomp.txt
MpiDefault=none
# Removes the PMIx sockets a killed node left behind, so a requeued job starts
# again there (see the script).
Prolog=$(cd "$(dirname "$0")" && pwd)/prolog-stale-pmix.sh
SwitchType=switch/none
ReturnToService=2
# Oversized requests fail at once instead of pending forever.
EnforcePartLimits=ALL
# Finished jobs stay visible to scontrol for two minutes.
MinJobAge=120
KillWait=5
InactiveLimit=0
SlurmctldTimeout=60
SlurmdTimeout=$slurmd_timeout
MessageTimeout=$message_timeout
SlurmctldDebug=info
SlurmdDebug=info
# Nodes claim CPUs whatever the machine has, so tests can run more one-CPU
# tasks than there are cores (and the CPU counts are the same on every machine).
SlurmdParameters=config_overrides
EOF
  if ((nodes > 0)); then
    cat >>"$conf.tmp" <<EOF
# Nodes in namespaces (slurm/test-cluster-nodes.sh), each with its own /tmp.
TmpFS=/tmp
SrunPortRange=60001-63000
EOF
    for ((k = 1; k <= nodes; k++)); do
      echo "NodeName=node$k NodeAddr=$subnet.$k CPUs=4 RealMemory=4000 State=UNKNOWN" >>"$conf.tmp"
    done
    echo "PartitionName=debug Nodes=node[1-$nodes] Default=YES MaxTime=INFINITE State=UP" >>"$conf.tmp"
  else
    cat >>"$conf.tmp" <<EOF
NodeName=$node NodeAddr=127.0.0.1 CPUs=8 RealMemory=16000 State=UNKNOWN
PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP
# Two CPUs only: one 2-CPU job fills it, so a test can make the next job queue.
PartitionName=tiny Nodes=$node MaxCPUsPerNode=2 MaxTime=INFINITE State=UP
EOF
  fi
  mv "$conf.tmp" "$conf"
}

start_munge() {
  live_pid munged >/dev/null && return 0
  if [ ! -s "$dir/munge/munge.key" ]; then
    mungekey --create --keyfile="$dir/munge/munge.key.tmp" >/dev/null 2>&1 ||
      dd if=/dev/urandom of="$dir/munge/munge.key.tmp" bs=1024 count=1 status=none
    chmod 600 "$dir/munge/munge.key.tmp"
    mv "$dir/munge/munge.key.tmp" "$dir/munge/munge.key"
  fi
  rm -f "$dir/munge/munge.socket" "$dir/munge/munge.socket.lock"
  munged --socket="$dir/munge/munge.socket" --key-file="$dir/munge/munge.key" \
    --pid-file="$dir/run/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munge/munged.seed"
}

# The slurmd pid files' names: one per node.
slurmd_names() {
  if (($(node_count) > 0)); then node_names | sed 's/^/slurmd-/'; else echo slurmd; fi
}

start_slurm_daemons() {
  live_pid slurmctld >/dev/null || slurmctld -f "$conf"
  if (($(node_count) == 0)); then
    live_pid slurmd >/dev/null || slurmd -f "$conf"
    return 0
  fi
  local n
  for n in $(node_names); do start_node_slurmd "$n"; done
}

show_logs() {
  local f
  for f in munged slurmctld $(slurmd_names); do
    echo "---- $dir/log/$f.log (last 25 lines)"
    tail -n 25 "$dir/log/$f.log" 2>/dev/null || echo "(none)"
  done
}

daemons_alive() {
  local d
  for d in slurmctld $(slurmd_names); do live_pid "$d" >/dev/null || return 1; done
}

# Waits until every node accepts jobs: idle or busy in the partition.
wait_until_ready() {
  local states="" begin=$SECONDS line
  while ((SECONDS - begin < 60)); do
    # A daemon that exited (a port in use, a bad config) will not come back: say so now.
    if ((SECONDS - begin >= 2)) && ! daemons_alive; then
      echo "test-cluster: a Slurm daemon exited during start" >&2
      status >&2 || true
      show_logs >&2
      return 1
    fi
    states=$(timeout 10 sinfo -h -N -p debug -o '%N %t' 2>/dev/null || true)
    local ready=1
    while read -r line; do
      [ -n "$line" ] || continue
      case ${line#* } in
        idle* | mix* | alloc* | comp*) ;;
        # A node left down by an earlier, killed cluster is brought back.
        down* | drain*) scontrol update nodename="${line%% *}" state=resume >/dev/null 2>&1 || true; ready=0 ;;
        *) ready=0 ;;
      esac
    done <<<"$states"
    [ -n "$states" ] && ((ready)) && return 0
    sleep 0.5
  done
  echo "test-cluster: the nodes did not become ready within 60 s (states: ${states:-none})" >&2
  show_logs >&2
  return 1
}

# The nodes can look idle from saved state before their slurmd registered:
# one real job step on every node proves munge, slurmctld and slurmd work
# together (run from a node on a multi-node cluster: its steps reach back
# only over the cluster's own network).
check_job_step() {
  local n=$(node_count) out
  if ((n == 0)); then
    out=$(timeout 60 srun --quiet --partition=debug --ntasks=1 --time=1 true 2>&1) && return 0
  else
    out=$(in_node node1 timeout 60 srun --quiet --partition=debug --nodes="$n" --ntasks-per-node=1 --time=1 hostname 2>&1) &&
      [ "$(sort <<<"$out" | paste -sd ' ')" = "$(node_names | sort | paste -sd ' ')" ] && return 0
  fi
  echo "test-cluster: a test job step did not run: $out" >&2
  show_logs >&2
  return 1
}

status() {
  local d pid all=0
  for d in munged slurmctld $(slurmd_names) $(node_names | sed 's/^/holder-/'); do
    if pid=$(live_pid "$d"); then echo "$d: running (pid $pid)"; else echo "$d: stopped"; all=1; fi
  done
  ((all == 0)) && sinfo -h -o '%P %a %D %t %C' 2>/dev/null | sed 's/^/partition: /' || true
  echo "export SLURM_CONF=$conf"
  return $all
}

# Ends one daemon by its pid file: TERM, then KILL after 10 s.
stop_daemon() {
  local pid i
  pid=$(live_pid "$1") || return 0
  kill -TERM "$pid" 2>/dev/null || return 0
  for ((i = 0; i < 100; i++)); do
    is_gone "$pid" && return 0
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
}

stop() {
  # Jobs still running would outlive slurmd in their slurmstepd: cancel them first.
  if daemons_alive; then
    scancel --user="$(id -un)" >/dev/null 2>&1 || true
    local i
    for ((i = 0; i < 100; i++)); do
      [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break
      sleep 0.2
    done
  fi
  local d n
  for d in $(slurmd_names); do stop_daemon "$d"; done
  # A node's leftovers (ranks of a killed job step), then the node itself.
  for n in $(node_names); do stop_node "$n"; done
  remove_bridge
  stop_daemon slurmctld
  stop_daemon munged
  echo "test-cluster: stopped ($dir)"
}

start() {
  local cmd n
  for cmd in munged mungekey slurmctld slurmd sinfo; do
    command -v "$cmd" >/dev/null || PATH=$PATH:/usr/sbin
    command -v "$cmd" >/dev/null || { echo "test-cluster: $cmd not found: install munge and slurm-wlm (.ci/install-deps)" >&2; exit 1; }
  done
  mkdir -p "$dir"/{etc,munge,state,spool,run,log}
  chmod 755 "$dir/munge"  # munged insists that everyone may reach its socket
  if live_pid slurmctld >/dev/null; then
    # The config is rewritten only while slurmctld is down, so a running
    # cluster never sees its config change under it.
    (($(node_count) == nodes_wanted)) ||
      { echo "test-cluster: $dir runs $(node_count) namespace nodes, not $nodes_wanted: stop it first" >&2; exit 1; }
  else
    if ((nodes_wanted > 0)); then
      echo "$nodes_wanted" >"$dir/nodes"
    else
      rm -f "$dir/nodes"
    fi
    write_config "$nodes_wanted"
  fi
  start_munge || { show_logs >&2; exit 1; }
  if (($(node_count) > 0)); then
    write_node_files "$(node_count)"
    make_bridge
    for ((n = 1; n <= $(node_count); n++)); do start_node "$n" || exit 1; done
  fi
  start_slurm_daemons || { show_logs >&2; exit 1; }
  wait_until_ready
  check_job_step || exit 1
  echo "test-cluster: running ($dir$( (($(node_count) > 0)) && echo ", nodes $(node_names | paste -sd ' ')"))"
  echo "export SLURM_CONF=$conf"
}

# The node argument of the per-node actions, checked against the cluster.
known_node() {
  (($(node_count) > 0)) || { echo "test-cluster: $dir has no namespace nodes (start --nodes N)" >&2; exit 1; }
  [[ " $(node_names | paste -sd ' ') " == *" $1 "* ]] || { echo "test-cluster: no node '$1' in $dir ($(node_names | paste -sd ' '))" >&2; exit 1; }
}

case $action in
  start) start ;;
  stop) stop ;;
  status) status ;;
  exec) known_node "$1"; in_node "$@" ;;
  kill-node) known_node "$1"; kill_node "$1" ;;
  restart-node) known_node "$1"; start_node "${1#node}"; start_node_slurmd "$1" ;;
  link) (($# == 2)) || usage; known_node "$1"; node_link "$1" "$2" ;;
esac
