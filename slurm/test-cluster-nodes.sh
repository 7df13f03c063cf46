# Sourced by slurm/test-cluster.sh: the "nodes" of a multi-node test cluster
# on this one machine, each a set of Linux namespaces (network, hostname,
# mount) held open by one holder process:
#   - its own hostname nodeK and address SUBNET.K on eth0, a veth pair whose
#     host end sits on a bridge of the cluster's own (SUBNET.254), so nodes
#     reach each other and the controller only over that private network;
#   - its own /tmp (DIR/node/nodeK/tmp, node-local storage) and /dev/shm
#     (tmpfs), an /etc/hosts listing the cluster, and an Open MPI parameter
#     file for the cluster's fabric (TCP over eth0);
#   - everything else, the project folder and DIR included, shared as a
#     cluster's parallel filesystem is.
# What it makes is recorded in DIR (pid files, DIR/network), so stop removes
# exactly that. Needs: dir, live_pid (from test-cluster.sh).

# Names and addresses of this folder's own, from a checksum of its path (as
# the ports are), so two clusters never share a bridge or a subnet.
network_names() {
  local sum
  sum=$(printf '%s' "$dir" | cksum | cut -d' ' -f1)
  bridge=$(printf 'dlsb%05x' $((sum % 1048576)))
  veth_prefix=$(printf 'dlsv%05x' $((sum % 1048576)))
  subnet=10.213.$((1 + sum % 250))
  controller_addr=$subnet.254
}

node_count() { cat "$dir/nodes" 2>/dev/null || echo 0; }
node_names() {
  local k
  for ((k = 1; k <= $(node_count); k++)); do echo "node$k"; done
}
holder_pid() { live_pid "holder-$1"; }

# Runs a command in node $1's namespaces, from the caller's working folder
# (nsenter into a mount namespace starts at /).
in_node() {
  local node=$1 pid
  shift
  pid=$(holder_pid "$node") || { echo "test-cluster: $node is not running" >&2; return 1; }
  nsenter -t "$pid" -n -u -m -- bash -c 'cd "$1" 2>/dev/null || cd /; shift; exec "$@"' _ "$PWD" "$@"
}

write_node_files() {
  local k
  {
    echo "127.0.0.1 localhost"
    echo "$controller_addr $(hostname -s)"
    for ((k = 1; k <= $1; k++)); do echo "$subnet.$k node$k"; done
  } >"$dir/etc/hosts"
  # A cluster's admins set Open MPI up for its fabric once; here: TCP between
  # nodes on eth0 only, shared memory within a node, and mpirun --hostfile
  # starting its daemons through bin/rsh (no sshd). Yield when idle: the
  # nodes share this machine's few cores. For the same reason no binding:
  # each node's mpirun daemon sees all of this machine's cores as its own,
  # and Open MPI's default (bind to core with 2 ranks or fewer) put every
  # node's first rank on core 0, 2 nodes' ranks on one core (measured: the
  # example CNN's forward 2.3x slower than on 2 cores).
  cat "/etc/openmpi/openmpi-mca-params.conf" >"$dir/etc/openmpi-mca-params.conf" 2>/dev/null || true
  cat >>"$dir/etc/openmpi-mca-params.conf" <<EOF
# Added by slurm/test-cluster.sh for its nodes
pml = ob1
btl = self,vader,tcp
btl_tcp_if_include = eth0
oob_tcp_if_include = eth0
mpi_yield_when_idle = 1
hwloc_base_binding_policy = none
plm_rsh_agent = $dir/bin/rsh
plm_rsh_no_tree_spawn = 1
EOF
  mkdir -p "$dir/bin"
  cat >"$dir/bin/rsh" <<EOF
#!/usr/bin/env bash
# mpirun's remote shell on the test cluster: runs a command line in a node.
# usage: rsh NODE COMMAND...
node=\$1
shift
pid=\$(cat "$dir/run/holder-\$node.pid" 2>/dev/null) || { echo "rsh: no node \$node in $dir" >&2; exit 255; }
exec nsenter -t "\$pid" -n -u -m -- /bin/sh -c "\$*"
EOF
  chmod 755 "$dir/bin/rsh"
}

make_bridge() {
  ip link show "$bridge" >/dev/null 2>&1 || ip link add "$bridge" type bridge
  [[ $(ip -4 -o addr show dev "$bridge") == *" $controller_addr/"* ]] || ip addr add "$controller_addr/24" dev "$bridge"
  ip link set "$bridge" up
  printf 'bridge=%s\nsubnet=%s.0/24\n' "$bridge" "$subnet" >"$dir/network"
}

# Makes node K (idempotent): the holder process in fresh namespaces, its
# mounts, its link and address.
start_node() {
  local k=$1 node=node$1 pid i
  holder_pid "$node" >/dev/null && return 0
  local home=$dir/node/$node pidfile=$dir/run/holder-$node.pid
  mkdir -p "$home/tmp"
  chmod 1777 "$home/tmp"
  rm -f "$pidfile"
  # The holder names its folder on its command line, so live_pid knows it as ours.
  # A cluster folder under /tmp (a checkout there) stays shared: its top
  # folder is bound into the node's /tmp before that covers the machine's.
  local shared=""
  case $dir/ in /tmp/?*) shared=${dir#/tmp/} shared=/tmp/${shared%%/*} ;; esac
  setsid unshare --net --uts --mount --propagation private -- bash -c '
    set -e
    hostname "$1"
    if [ -n "$5" ]; then
      mkdir -p "$2/tmp/${5#/tmp/}"
      mount --bind "$5" "$2/tmp/${5#/tmp/}"
    fi
    mount --rbind "$2/tmp" /tmp
    mount -t tmpfs -o size=512m,mode=1777 tmpfs /dev/shm
    mount --bind "$3/etc/hosts" /etc/hosts
    mount --bind "$3/etc/openmpi-mca-params.conf" /etc/openmpi/openmpi-mca-params.conf
    ip link set lo up
    echo $$ >"$4.tmp"
    mv "$4.tmp" "$4"
    exec -a "dlscale-node $2" sleep infinity' _ "$node" "$home" "$dir" "$pidfile" "$shared" \
    </dev/null >>"$dir/log/nodes.log" 2>&1 &
  for ((i = 0; i < 100; i++)); do
    pid=$(holder_pid "$node") && break
    sleep 0.05
  done
  [ -n "${pid:-}" ] || { echo "test-cluster: $node did not start (log/nodes.log)" >&2; tail -n 5 "$dir/log/nodes.log" >&2; return 1; }
  ip link add "${veth_prefix}n$k" type veth peer name eth0 netns "$pid"
  ip link set "${veth_prefix}n$k" master "$bridge" up
  nsenter -t "$pid" -n -- ip addr add "$subnet.$k/24" dev eth0
  nsenter -t "$pid" -n -- ip link set eth0 up
}

start_node_slurmd() {
  live_pid "slurmd-$1" >/dev/null || in_node "$1" slurmd -f "$conf"
}

# Every process in node $1's network namespace but its holder: its slurmd,
# job steps and ranks, whatever they forked.
node_processes() {
  local holder=$1 p
  # -ef (same file) is a shell builtin: no command per process, as a
  # readlink would be, which costs seconds on a busy machine.
  for p in /proc/[0-9]*; do
    [ "$p" = "/proc/$holder" ] && continue
    [[ $p/ns/net -ef /proc/$holder/ns/net ]] && echo "${p#/proc/}"
  done
  return 0
}

# A process is gone once it has no /proc entry or is a zombie (PID 1 here
# can be slow to reap).
is_gone() {
  local stat
  { read -r stat <"/proc/$1/stat"; } 2>/dev/null || return 0
  stat=${stat##*) }
  [ "${stat%% *}" = Z ]
}

# SIGKILL to every process of node $1 but its holder: a node that loses
# power (its slurmd, ranks, staged files stay in its /tmp).
kill_node() {
  local node=$1 holder p i
  holder=$(holder_pid "$node") || { echo "test-cluster: $node is not running" >&2; return 1; }
  for ((i = 0; i < 20; i++)); do
    local left=()
    for p in $(node_processes "$holder"); do
      kill -KILL "$p" 2>/dev/null || true
      is_gone "$p" || left+=("$p")
    done
    ((${#left[@]} == 0)) && return 0
    sleep 0.1
  done
  echo "test-cluster: processes of $node survived SIGKILL: ${left[*]}" >&2
  return 1
}

stop_node() {
  local holder
  holder=$(holder_pid "$1") || return 0
  kill_node "$1" || true
  kill -KILL "$holder" 2>/dev/null || true
}

remove_bridge() {
  [ -s "$dir/network" ] || return 0
  local name
  name=$(sed -n 's/^bridge=//p' "$dir/network")
  [ -n "$name" ] && ip link del "$name" 2>/dev/null || true
  rm -f "$dir/network"
}

# link NODE up|down, or limit NODE RATE|none (tc tbf on both ends of the link).
node_link() {
  local node=$1 what=$2 k=${1#node}
  local veth=${veth_prefix}n$k
  holder_pid "$node" >/dev/null || { echo "test-cluster: $node is not running" >&2; return 1; }
  case $what in
    up | down) ip link set "$veth" "$what" ;;
    none)
      tc qdisc del dev "$veth" root 2>/dev/null || true
      in_node "$node" tc qdisc del dev eth0 root 2>/dev/null || true
      ;;
    *)
      # A small burst, as a real link has none: with 1 MB the token bucket
      # refilled during a step's computation and passed a whole 0.83 MB
      # gradient all-reduce at the veth's speed (measured: 1 ms in a step,
      # 7 ms back to back at 1 Gbit/s). 64 KB is one segment of the veth's
      # offloaded TCP, which tbf would otherwise have to split.
      tc qdisc replace dev "$veth" root tbf rate "$what" burst 64kb latency 100ms
      in_node "$node" tc qdisc replace dev eth0 root tbf rate "$what" burst 64kb latency 100ms
      ;;
  esac
}
