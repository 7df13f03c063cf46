#!/usr/bin/env bash
# A one-node Slurm cluster on this machine for dlscale's end-to-end tests:
#   slurm/test-cluster.sh start|stop|status [DIR]   (DIR: build/slurm-cluster of this checkout)
# start brings up munged, slurmctld and slurmd (Debian's munge and slurm-wlm)
# from nothing, with every file they use (config, key, sockets, state, spool,
# logs, pid files) under DIR and ports of DIR's own, so it never touches a
# system Slurm or another test cluster. It is idempotent: what already runs is
# left alone. stop ends only the daemons whose pid files are in DIR. start and
# status print the line that points Slurm's commands at the cluster:
#   export SLURM_CONF=DIR/slurm.conf
set -euo pipefail

usage() {
  echo "usage: $0 start|stop|status [DIR]" >&2
  exit 2
}
(($# >= 1 && $# <= 2)) || usage
action=$1
dir=${2:-$(cd "$(dirname "$0")/.." && pwd)/build/slurm-cluster}
case $action in start | stop | status) ;; *) usage ;; esac
[ "$action" = start ] && mkdir -p "$dir"
[ -d "$dir" ] || { echo "test-cluster: no cluster folder $dir" >&2; [ "$action" = stop ] && exit 0; exit 1; }
dir=$(cd "$dir" && pwd)
conf=$dir/slurm.conf
export SLURM_CONF=$conf
node=$(hostname -s)
# Unix socket paths are limited to 107 bytes.
((${#dir} < 80)) || { echo "test-cluster: folder path too long for munge's socket: $dir" >&2; exit 1; }

# The pid in a daemon's pid file, printed only while that process is alive and
# is one of ours (its command line names this folder), so a reused pid of an
# unrelated process is never reported or killed.
live_pid() {
  local file=$dir/run/$1.pid pid
  [ -s "$file" ] || return 1
  pid=$(<"$file")
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$dir/" || return 1
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
  ports
  : >"$dir/etc/plugstack.conf"
  cat >"$conf.tmp" <<EOF
# Written by slurm/test-cluster.sh: a one-node test cluster under $dir
ClusterName=dlscale-test
SlurmctldHost=$node
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
SlurmdPidFile=$dir/run/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
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
SwitchType=switch/none
ReturnToService=2
# Oversized requests fail at once instead of pending forever.
EnforcePartLimits=ALL
# Finished jobs stay visible to scontrol for two minutes.
MinJobAge=120
KillWait=5
InactiveLimit=0
SlurmctldTimeout=60
SlurmdTimeout=60
SlurmctldDebug=info
SlurmdDebug=info
# The node claims 8 CPUs whatever the machine has, so tests can run 8 one-CPU
# tasks (and the CPU counts below are the same on every machine).
SlurmdParameters=config_overrides
NodeName=$node NodeAddr=127.0.0.1 CPUs=8 RealMemory=16000 State=UNKNOWN
PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP
# Two CPUs only: one 2-CPU job fills it, so a test can make the next job queue.
PartitionName=tiny Nodes=$node MaxCPUsPerNode=2 MaxTime=INFINITE State=UP
EOF
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

start_slurm_daemons() {
  if ! live_pid slurmctld >/dev/null; then
    slurmctld -f "$conf"
  fi
  if ! live_pid slurmd >/dev/null; then
    slurmd -f "$conf"
  fi
}

show_logs() {
  local f
  for f in munged slurmctld slurmd; do
    echo "---- $dir/log/$f.log (last 25 lines)"
    tail -n 25 "$dir/log/$f.log" 2>/dev/null || echo "(none)"
  done
}

# Waits until the node accepts jobs: it is idle or busy in the partition.
wait_until_ready() {
  local state="" begin=$SECONDS
  while ((SECONDS - begin < 60)); do
    # A daemon that exited (a port in use, a bad config) will not come back: say so now.
    if ((SECONDS - begin >= 2)) && ! { live_pid slurmctld >/dev/null && live_pid slurmd >/dev/null; }; then
      echo "test-cluster: a Slurm daemon exited during start" >&2
      status >&2 || true
      show_logs >&2
      return 1
    fi
    state=$(timeout 10 sinfo -h -n "$node" -p debug -o %t 2>/dev/null | head -n 1 || true)
    case $state in idle* | mix* | alloc* | comp*) return 0 ;; esac
    # A node left down by an earlier, killed cluster is brought back.
    case $state in down* | drain*) scontrol update nodename="$node" state=resume >/dev/null 2>&1 || true ;; esac
    sleep 0.5
  done
  echo "test-cluster: the node did not become ready within 60 s (state: ${state:-none})" >&2
  show_logs >&2
  return 1
}

status() {
  local d pid all=0
  for d in munged slurmctld slurmd; do
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
    [ -d "/proc/$pid" ] || return 0
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
}

stop() {
  # Jobs still running would outlive slurmd in their slurmstepd: cancel them first.
  if live_pid slurmctld >/dev/null && live_pid slurmd >/dev/null; then
    scancel --user="$(id -un)" >/dev/null 2>&1 || true
    local i
    for ((i = 0; i < 100; i++)); do
      [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break
      sleep 0.2
    done
  fi
  stop_daemon slurmd
  stop_daemon slurmctld
  stop_daemon munged
  echo "test-cluster: stopped ($dir)"
}

case $action in
  start)
    for cmd in munged mungekey slurmctld slurmd sinfo; do
      command -v "$cmd" >/dev/null || PATH=$PATH:/usr/sbin
      command -v "$cmd" >/dev/null || { echo "test-cluster: $cmd not found: install munge and slurm-wlm (.ci/install-deps)" >&2; exit 1; }
    done
    mkdir -p "$dir"/{etc,munge,state,spool,run,log}
    chmod 755 "$dir/munge"  # munged insists that everyone may reach its socket
    # The config is rewritten only while slurmctld is down, so a running
    # cluster never sees its config change under it.
    live_pid slurmctld >/dev/null || write_config
    start_munge || { show_logs >&2; exit 1; }
    start_slurm_daemons || { show_logs >&2; exit 1; }
    wait_until_ready
    # The node can look idle from saved state before slurmd has registered:
    # one tiny job step proves munge, slurmctld and slurmd work together.
    if ! out=$(timeout 60 srun --quiet --partition=debug --ntasks=1 --time=1 true 2>&1); then
      echo "test-cluster: a test job step did not run: $out" >&2
      show_logs >&2
      exit 1
    fi
    echo "test-cluster: running ($dir)"
    echo "export SLURM_CONF=$conf"
    ;;
  stop) stop ;;
  status) status ;;
esac
