# shellcheck shell=bash
# A private Slurm cluster on this machine for the end-to-end tests that plan and run
# goldminer jobs under Slurm. Source this file, then:
#
#   slurm_cluster_start DIR   # everything lives under DIR; exports SLURM_CONF
#   ...                       # sinfo, scontrol, sbatch, srun now use the cluster
#   slurm_cluster_stop [DIR]  # idempotent, safe in a trap (default: the last started)
#
# The cluster: a private munged, one slurmctld and four slurmd processes on 127.0.0.1,
#   gpu1, gpu2  partition gpu            CPUs=8 RealMemory=16000 Gres=gpu:2 (fake GPUs)
#   cpu1, cpu2  partition cpu (default)  CPUs=8 RealMemory=16000
#   cpu2        partition scavenger      lower PriorityTier: preempted (CANCEL,
#                                        GraceTime=5) when gpu or cpu jobs need it
# set up as production clusters are: consumable memory (CR_Core_Memory,
# DefMemPerCPU=1000), GRES on the GPU nodes, and a task plugin that binds a step's
# CPUs (task/affinity; see _slurm_cluster_write_conf for what it can bind here).
# Each daemon listens on its own free TCP port (slurmctld on BASE, the nodes on
# BASE+1..BASE+4, BASE picked at random below the ephemeral range), so several clusters
# can run at once. Every daemon's PID is saved in DIR/pids; stopping signals exactly
# those processes and removes nothing outside DIR.
#
# With SLURM_CLUSTER_NETNS=1 set before the start, every node is a host of its own on
# the network too: each slurmd (and so every job step on that node) runs in a
# network namespace of its own, joined to the others by a veth pair on a private
# bridge (10.A.B.0/24 from the port base; slurmctld at .1 on the bridge, node k at
# .(10+k)). Loopback is then per node, and a process reaches another node only
# through that node's address, as on a real cluster.
#
# Needs root and Debian's slurmctld, slurmd, slurm-client and munge packages
# (scripts/install-deps.sh), plus iproute2 for SLURM_CLUSTER_NETNS=1. Works under
# `set -euo pipefail` in the caller.

SLURM_CLUSTER_NODES=(gpu1 gpu2 cpu1 cpu2)
SLURM_CLUSTER_DIR=${SLURM_CLUSTER_DIR:-}
SLURM_CLUSTER_UTS=${SLURM_CLUSTER_UTS:-0}  # 1 when each slurmd runs with its node's hostname
SLURM_CLUSTER_NETNS=${SLURM_CLUSTER_NETNS:-0}  # 1: each node in a network namespace of its own

_slurm_cluster_say() { echo "slurm_cluster: $*" >&2; }

# _slurm_cluster_alive PID: the process exists and has not exited (a zombie counts as
# gone: a stopped daemon stays one until its parent shell reaps it).
_slurm_cluster_alive() {
  local state
  state=$(awk '{ sub(/^.*\) /, ""); print $1 }' "/proc/$1/stat" 2>/dev/null) || return 1
  [[ -n $state && $state != Z && $state != X ]]
}

# _slurm_cluster_ours PID DIR: the process is one this library started for DIR (its
# command line names DIR), so a recycled PID is never signalled.
_slurm_cluster_ours() {
  local cmdline
  cmdline=$(tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null) || return 1
  [[ $cmdline == *"$2/"* ]]
}

# _slurm_cluster_pick_ports: sets SLURM_CLUSTER_PORT to a BASE with BASE..BASE+4 free:
# no TCP socket (listening, connected or closing, IPv4 or IPv6) has them as local port.
_slurm_cluster_pick_ports() {
  local low i base p free used
  read -r low _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || low=32768
  ((low > 12000)) || low=32768
  used=" $(awk 'FNR > 1 { split($2, a, ":"); printf "%s ", a[2] }' /proc/net/tcp /proc/net/tcp6 2>/dev/null) "
  for ((i = 0; i < 200; i++)); do
    base=$((10000 + (RANDOM * 32768 + RANDOM) % (low - 10000 - 5)))
    free=1
    for p in $(seq "$base" $((base + 4))); do
      [[ $used == *" $(printf %04X "$p") "* ]] && { free=0; break; }
    done
    if ((free)); then
      SLURM_CLUSTER_PORT=$base
      return 0
    fi
  done
  _slurm_cluster_say "no 5 consecutive free TCP ports found below $low"
  return 1
}

_slurm_cluster_bin() {  # _slurm_cluster_bin NAME: the program's path (sbin is often not in PATH)
  local p
  p=$(command -v "$1" 2>/dev/null) && { echo "$p"; return 0; }
  for p in "/usr/sbin/$1" "/usr/bin/$1"; do
    [[ -x $p ]] && { echo "$p"; return 0; }
  done
  return 1
}

_slurm_cluster_logs() {  # prints the tail of every daemon's log
  local d=$1 f
  for f in "$d"/log/munged.log "$d"/log/slurmctld.out "$d"/log/slurmd.*.out; do
    # A daemon's own log once it opened it, else what it printed before that.
    [[ -s ${f%.out}.log ]] && f=${f%.out}.log
    [[ -s $f ]] || continue
    echo "----- $f (last lines, without the harmless PMIx messages)" >&2
    grep -v -e 'pmix' -e 'MPI: Cannot create context' "$f" | tail -n 15 >&2
  done
  if [[ -f $d/pids/slurmctld ]] && _slurm_cluster_alive "$(<"$d/pids/slurmctld")"; then
    echo "----- the nodes' states (sinfo -N -o '%N %T %E')" >&2
    timeout 10 sinfo -N -h -o '%N %T %E' >&2 2>&1 || true
  fi
}

# _slurm_cluster_signal DIR NAME...: TERM, wait up to 10 s, then KILL the saved PIDs.
_slurm_cluster_signal() {
  local d=$1 name pid i left
  shift
  local pids=()
  for name in "$@"; do
    [[ -f $d/pids/$name ]] || continue
    pid=$(<"$d/pids/$name")
    if [[ $pid =~ ^[0-9]+$ ]] && _slurm_cluster_alive "$pid" && _slurm_cluster_ours "$pid" "$d"; then
      kill -TERM "$pid" 2>/dev/null || true
      pids+=("$pid")
    fi
  done
  for ((i = 0; i < 100; i++)); do
    left=0
    for pid in ${pids[@]+"${pids[@]}"}; do
      _slurm_cluster_alive "$pid" && left=1
    done
    ((left)) || break
    sleep 0.1
  done
  for pid in ${pids[@]+"${pids[@]}"}; do
    if _slurm_cluster_alive "$pid"; then
      _slurm_cluster_say "pid $pid did not stop on TERM in 10 s; sending KILL"
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
  for pid in ${pids[@]+"${pids[@]}"}; do
    for ((i = 0; i < 50; i++)); do
      _slurm_cluster_alive "$pid" || break
      sleep 0.1
    done
    wait "$pid" 2>/dev/null || true  # reaps the daemon when this shell started it
  done
  for name in "$@"; do
    rm -f "$d/pids/$name"
  done
}

# slurm_cluster_stop [DIR]: cancels the cluster's jobs, then stops its daemons (slurmd,
# slurmctld, munged) by their saved PIDs. Does nothing when nothing runs; never fails.
slurm_cluster_stop() {
  local d=${1:-$SLURM_CLUSTER_DIR} n i
  [[ -n $d && -d $d/pids ]] || return 0
  d=$(cd "$d" 2>/dev/null && pwd) || return 0
  local conf=$d/slurm.conf
  # Jobs first, while slurmctld and the nodes still run: their processes would outlive
  # the slurmd that started them.
  if [[ -f $d/pids/slurmctld && -f $conf ]] && _slurm_cluster_alive "$(<"$d/pids/slurmctld")"; then
    local jobs
    jobs=$(SLURM_CONF=$conf timeout 10 squeue -h -t PD,R,CG,S -o %A 2>/dev/null || true)
    if [[ -n $jobs ]]; then
      # shellcheck disable=SC2086
      SLURM_CONF=$conf timeout 10 scancel $jobs 2>/dev/null || true
      for ((i = 0; i < 100; i++)); do
        [[ -z $(SLURM_CONF=$conf timeout 10 squeue -h -t PD,R,CG,S -o %A 2>/dev/null || true) ]] && break
        sleep 0.1
      done
    fi
  fi
  local slurmds=()
  for n in "${SLURM_CLUSTER_NODES[@]}"; do slurmds+=("slurmd.$n"); done
  _slurm_cluster_signal "$d" "${slurmds[@]}"
  _slurm_cluster_signal "$d" slurmctld
  _slurm_cluster_signal "$d" munged
  _slurm_cluster_net_down "$d"
  rmdir "$d/pids" 2>/dev/null || true
  if [[ ${SLURM_CONF:-} == "$conf" ]]; then
    if [[ -n ${_SLURM_CLUSTER_PREV_CONF+x} ]]; then
      export SLURM_CONF=$_SLURM_CLUSTER_PREV_CONF
    else
      unset SLURM_CONF
    fi
  fi
  [[ $d == "$SLURM_CLUSTER_DIR" ]] && SLURM_CLUSTER_DIR=
  return 0
}

# _slurm_cluster_net_names PORT: sets the bridge's name, the subnet's prefix and one
# namespace name per node, all derived from the port base (unique per cluster).
_slurm_cluster_net_names() {
  local port=$1
  : "${_SLURM_CLUSTER_IP:=$(_slurm_cluster_bin ip || echo ip)}"
  _SLURM_CLUSTER_BRIDGE=gmbr$port
  _SLURM_CLUSTER_SUBNET=10.$((100 + port % 100)).$(((port / 100) % 250))
  _SLURM_CLUSTER_NS_PREFIX=gm$port-
}

# _slurm_cluster_net_up DIR PORT: the bridge (slurmctld's address .1) and, per node, a
# namespace with one end of a veth pair (address .(10+k)), the other end on the bridge.
_slurm_cluster_net_up() {
  local d=$1 port=$2 n k=1 ns host
  _slurm_cluster_net_names "$port"
  echo "$port" >"$d/net"  # what slurm_cluster_stop removes
  "$_SLURM_CLUSTER_IP" link add "$_SLURM_CLUSTER_BRIDGE" type bridge &&
    "$_SLURM_CLUSTER_IP" addr add "$_SLURM_CLUSTER_SUBNET.1/24" dev "$_SLURM_CLUSTER_BRIDGE" &&
    "$_SLURM_CLUSTER_IP" link set "$_SLURM_CLUSTER_BRIDGE" up || return 1
  for n in "${SLURM_CLUSTER_NODES[@]}"; do
    ns=$_SLURM_CLUSTER_NS_PREFIX$n
    host=gm$port$k
    "$_SLURM_CLUSTER_IP" netns add "$ns" &&
      "$_SLURM_CLUSTER_IP" link add "$host" type veth peer name eth0 netns "$ns" &&
      "$_SLURM_CLUSTER_IP" link set "$host" master "$_SLURM_CLUSTER_BRIDGE" &&
      "$_SLURM_CLUSTER_IP" link set "$host" up &&
      "$_SLURM_CLUSTER_IP" -n "$ns" addr add "$_SLURM_CLUSTER_SUBNET.$((10 + k))/24" dev eth0 &&
      "$_SLURM_CLUSTER_IP" -n "$ns" link set eth0 up &&
      "$_SLURM_CLUSTER_IP" -n "$ns" link set lo up || return 1
    k=$((k + 1))
  done
}

_slurm_cluster_net_down() {  # _slurm_cluster_net_down DIR: idempotent
  local d=$1 n
  [[ -f $d/net ]] || return 0
  _slurm_cluster_net_names "$(<"$d/net")"
  for n in "${SLURM_CLUSTER_NODES[@]}"; do
    "$_SLURM_CLUSTER_IP" netns del "$_SLURM_CLUSTER_NS_PREFIX$n" 2>/dev/null || true  # takes its veth pair along
  done
  "$_SLURM_CLUSTER_IP" link del "$_SLURM_CLUSTER_BRIDGE" 2>/dev/null || true
  rm -f "$d/net"
}

_slurm_cluster_write_conf() {  # _slurm_cluster_write_conf DIR BASE_PORT
  local d=$1 port=$2 n k=1
  {
    echo "# A private test cluster: every path is under $d."
    echo "ClusterName=goldminer"
    local ctl=127.0.0.1
    ((SLURM_CLUSTER_NETNS)) && ctl=$_SLURM_CLUSTER_SUBNET.1
    echo "SlurmctldHost=$(hostname -s)($ctl)"
    echo "SlurmctldPort=$port"
    echo "SlurmUser=root"
    echo "SlurmdUser=root"
    echo "AuthType=auth/munge"
    echo "CredType=cred/munge"
    echo "AuthInfo=socket=$d/munge/socket/munge.socket.2"
    echo "StateSaveLocation=$d/state"
    echo "SlurmdSpoolDir=$d/spool/%n"
    echo "SlurmctldPidFile=$d/run/slurmctld.pid"
    echo "SlurmdPidFile=$d/run/slurmd.%n.pid"
    echo "SlurmctldLogFile=$d/log/slurmctld.log"
    echo "SlurmdLogFile=$d/log/slurmd.%n.log"
    echo "SlurmdParameters=config_overrides"
    echo "ProctrackType=proctrack/linuxproc"
    # task/affinity binds each step's tasks to the CPUs Slurm gave it, as production
    # clusters do (there usually with task/cgroup, which needs a cgroup hierarchy
    # slurmd may own: not here, without systemd). On this host it runs, but the
    # nodes declare 8 CPUs on a 2-core machine, so slurmd folds every mask onto the
    # real CPUs ("more resources configured than exist"): the steps run bound, not
    # on cores of their own. SLURM_CLUSTER_TASK_PLUGIN=task/none turns it off.
    echo "TaskPlugin=${SLURM_CLUSTER_TASK_PLUGIN:-task/affinity}"
    echo "SelectType=select/cons_tres"
    echo "SelectTypeParameters=CR_Core_Memory"
    echo "DefMemPerCPU=1000"
    echo "MpiDefault=none"
    echo "AccountingStorageType=accounting_storage/none"
    echo "JobAcctGatherType=jobacct_gather/none"
    echo "JobCompType=jobcomp/filetxt"
    echo "JobCompLoc=$d/log/jobcomp.txt"
    echo "MinJobAge=3600"
    echo "SchedulerType=sched/backfill"
    echo "SchedulerParameters=bf_interval=1,batch_sched_delay=0,sched_min_interval=100000"
    echo "EnforcePartLimits=ALL"
    echo "KillWait=5"
    echo "ReturnToService=2"
    echo "MailProg=/bin/true"
    echo "GresTypes=gpu"
    for n in "${SLURM_CLUSTER_NODES[@]}"; do
      local addr=127.0.0.1
      ((SLURM_CLUSTER_NETNS)) && addr=$_SLURM_CLUSTER_SUBNET.$((10 + k))
      echo -n "NodeName=$n NodeHostname=localhost NodeAddr=$addr Port=$((port + k))"
      echo -n " CPUs=8 RealMemory=16000"
      [[ $n == gpu* ]] && echo -n " Gres=gpu:2"
      echo " State=UNKNOWN"
      k=$((k + 1))
    done
    # Preemption without slurmdbd: a scavenger partition on cpu2, below the others'
    # tier; its jobs get SIGTERM, then SIGKILL 5 s later, when a job of the others
    # needs their CPUs (../shared/notes/slurm-local.md).
    echo "PreemptType=preempt/partition_prio"
    echo "PreemptMode=CANCEL"
    echo "PartitionName=gpu Nodes=gpu1,gpu2 MaxTime=INFINITE State=UP PriorityTier=2"
    echo "PartitionName=cpu Nodes=cpu1,cpu2 Default=YES MaxTime=INFINITE State=UP PriorityTier=2"
    echo "PartitionName=scavenger Nodes=cpu2 MaxTime=INFINITE State=UP PriorityTier=1 PreemptMode=CANCEL GraceTime=5"
  } >"$d/slurm.conf"
  # Fake GPUs: Slurm needs a device file per GPU; a symlink to /dev/null will do.
  : >"$d/gres.conf"
  for n in gpu1 gpu2; do
    ln -sfn /dev/null "$d/dev/$n-gpu0"
    ln -sfn /dev/null "$d/dev/$n-gpu1"
    echo "NodeName=$n Name=gpu File=$d/dev/$n-gpu[0-1]" >>"$d/gres.conf"
  done
}

# _slurm_cluster_wait_idle DIR SECONDS: every node IDLE, or 1 when a daemon died or time ran out.
_slurm_cluster_wait_idle() {
  local d=$1 secs=$2 i name out idle
  for ((i = 0; i < secs * 5; i++)); do
    for name in munged slurmctld "${SLURM_CLUSTER_NODES[@]/#/slurmd.}"; do
      if ! _slurm_cluster_alive "$(<"$d/pids/$name")"; then
        _slurm_cluster_say "$name exited during start-up"
        return 1
      fi
    done
    out=$(timeout 5 scontrol show node --oneliner 2>/dev/null || true)
    idle=$(grep -cE '^NodeName=(gpu|cpu)[12] .*State=IDLE ' <<<"$out" || true)
    ((idle == ${#SLURM_CLUSTER_NODES[@]})) && return 0
    if grep -q 'State=[A-Z+]*INVAL' <<<"$out"; then
      _slurm_cluster_say "a node registered with a configuration slurmctld refuses (INVAL)"
      return 1
    fi
    sleep 0.2
  done
  _slurm_cluster_say "the nodes were not all idle after $secs s"
  return 1
}

# _slurm_cluster_launch DIR: starts munged, slurmctld and the slurmds; 0 when all nodes are idle.
_slurm_cluster_launch() {
  local d=$1 n i sock=$1/munge/socket/munge.socket.2
  _slurm_cluster_pick_ports || return 1
  if ((SLURM_CLUSTER_NETNS)) && ! _slurm_cluster_net_up "$d" "$SLURM_CLUSTER_PORT"; then
    _slurm_cluster_say "cannot make the nodes' network namespaces (ip netns, veth, bridge)"
    return 1
  fi
  _slurm_cluster_write_conf "$d" "$SLURM_CLUSTER_PORT"
  export SLURM_CONF=$d/slurm.conf

  # munged wants every folder above its socket open for everyone to traverse; under a
  # private folder (mktemp -d) only root can reach it, which is enough here, and
  # --force turns that refusal into a warning.
  local force=() p=$d
  while [[ $p != / ]]; do
    [[ $(stat -c %A "$p") == *x ]] || { force=(--force); break; }
    p=$(dirname "$p")
  done
  "$_SLURM_CLUSTER_MUNGED" -F ${force[@]+"${force[@]}"} --socket="$sock" --key-file="$d/munge/key/munge.key" \
    --seed-file="$d/munge/key/munged.seed" --pid-file="$d/run/munged.pid" \
    --log-file="$d/log/munged.log" </dev/null >>"$d/log/munged.log" 2>&1 &
  echo $! >"$d/pids/munged"
  for ((i = 0; i < 100; i++)); do
    [[ -S $sock ]] && break
    _slurm_cluster_alive "$(<"$d/pids/munged")" || break
    sleep 0.05
  done
  [[ -S $sock ]] || { _slurm_cluster_say "munged did not create $sock"; return 1; }

  "$_SLURM_CLUSTER_SLURMCTLD" -D -c -f "$d/slurm.conf" </dev/null >>"$d/log/slurmctld.out" 2>&1 &
  echo $! >"$d/pids/slurmctld"

  for n in "${SLURM_CLUSTER_NODES[@]}"; do
    # In the node's network namespace when there is one: nsenter enters it and execs
    # (`ip netns exec` would also remount /sys, hiding the cgroup tree slurmd reads).
    local netns=()
    ((SLURM_CLUSTER_NETNS)) && netns=("$_SLURM_CLUSTER_NSENTER" "--net=/run/netns/$_SLURM_CLUSTER_NS_PREFIX$n")
    if ((SLURM_CLUSTER_UTS)); then
      # Same PID as slurmd: unshare and sh exec into it.
      # shellcheck disable=SC2016
      ${netns[@]+"${netns[@]}"} unshare --uts /bin/sh -c 'hostname "$1" && exec "$2" -D -f "$3" -N "$1"' \
        sh "$n" "$_SLURM_CLUSTER_SLURMD" "$d/slurm.conf" </dev/null >>"$d/log/slurmd.$n.out" 2>&1 &
    else
      ${netns[@]+"${netns[@]}"} "$_SLURM_CLUSTER_SLURMD" -D -f "$d/slurm.conf" -N "$n" \
        </dev/null >>"$d/log/slurmd.$n.out" 2>&1 &
    fi
    echo $! >"$d/pids/slurmd.$n"
  done
  _slurm_cluster_wait_idle "$d" 30
}

# slurm_cluster_start DIR: creates DIR (if needed) and runs the cluster in it until
# slurm_cluster_stop. Exports SLURM_CONF=DIR/slurm.conf; sets SLURM_CLUSTER_DIR,
# SLURM_CLUSTER_PORT (slurmctld's port; node k of gpu1 gpu2 cpu1 cpu2 has PORT+k) and
# SLURM_CLUSTER_UTS. Returns non-zero, with the daemons' logs on stderr and nothing
# left running, when the cluster does not come up.
slurm_cluster_start() {
  local d=${1:?usage: slurm_cluster_start DIR} b attempt
  local missing=()
  local tools=(munged slurmctld slurmd sinfo scontrol squeue sbatch srun scancel)
  ((SLURM_CLUSTER_NETNS)) && tools+=(ip nsenter)
  for b in "${tools[@]}"; do
    _slurm_cluster_bin "$b" >/dev/null || missing+=("$b")
  done
  if ((${#missing[@]})); then
    _slurm_cluster_say "FAIL: Slurm/munge programs not found: ${missing[*]}"
    _slurm_cluster_say "FAIL: run scripts/install-deps.sh (as root) to install slurmctld slurmd slurm-client munge"
    return 1
  fi
  if [[ $(id -u) != 0 ]]; then
    _slurm_cluster_say "FAIL: a private Slurm cluster needs root (slurmd runs jobs as their user)"
    return 1
  fi
  _SLURM_CLUSTER_MUNGED=$(_slurm_cluster_bin munged)
  _SLURM_CLUSTER_SLURMCTLD=$(_slurm_cluster_bin slurmctld)
  _SLURM_CLUSTER_SLURMD=$(_slurm_cluster_bin slurmd)
  _SLURM_CLUSTER_IP=$(_slurm_cluster_bin ip || echo ip)
  _SLURM_CLUSTER_NSENTER=$(_slurm_cluster_bin nsenter || echo nsenter)

  if ! mkdir -p "$d" || ! d=$(cd "$d" && pwd); then
    _slurm_cluster_say "FAIL: cannot create $1"
    return 1
  fi
  if [[ $d =~ [[:space:]#=,] ]]; then
    _slurm_cluster_say "FAIL: '$d' has a character slurm.conf cannot hold"
    return 1
  fi
  if [[ -d $d/pids ]]; then
    _slurm_cluster_say "FAIL: a cluster already runs in $d (slurm_cluster_stop $d first)"
    return 1
  fi
  if [[ -n $SLURM_CLUSTER_DIR ]]; then
    _slurm_cluster_say "FAIL: this shell already runs a cluster in $SLURM_CLUSTER_DIR"
    return 1
  fi
  local started=${EPOCHREALTIME/[.,]/}
  mkdir -p "$d/munge/key" "$d/munge/socket" "$d/state" "$d/run" "$d/log" "$d/dev" "$d/pids"
  mkdir -p "${SLURM_CLUSTER_NODES[@]/#/$d/spool/}"
  # munged refuses a socket whose parent folders not everyone may traverse, and folders
  # that others may write to; the key stays private.
  chmod go+x "$d"
  chmod 0711 "$d/munge"
  chmod 0700 "$d/munge/key"
  chmod 0755 "$d/munge/socket" "$d/log"
  if [[ ! -s $d/munge/key/munge.key ]]; then
    head -c 1024 /dev/urandom >"$d/munge/key/munge.key"
    chmod 0400 "$d/munge/key/munge.key"
  fi
  if [[ -n ${SLURM_CONF+x} ]]; then _SLURM_CLUSTER_PREV_CONF=$SLURM_CONF; else unset _SLURM_CLUSTER_PREV_CONF; fi
  SLURM_CLUSTER_UTS=0
  unshare --uts /bin/sh -c 'hostname gpu1' 2>/dev/null && SLURM_CLUSTER_UTS=1
  SLURM_CLUSTER_DIR=$d

  # Another cluster may take a chosen port between the check and the bind: then try
  # again on other ports.
  for attempt in 1 2 3; do
    if _slurm_cluster_launch "$d"; then
      local ms=$(((${EPOCHREALTIME/[.,]/} - started) / 1000))
      _slurm_cluster_say "4 nodes idle in $((ms / 1000)).$(printf %03d $((ms % 1000))) s (slurmctld port $SLURM_CLUSTER_PORT, nodes $((SLURM_CLUSTER_PORT + 1))-$((SLURM_CLUSTER_PORT + 4)), SLURM_CONF=$SLURM_CONF)"
      return 0
    fi
    if ((attempt < 3)) && grep -qs 'Address already in use' "$d"/log/*.log "$d"/log/*.out; then
      _slurm_cluster_say "a port was taken; restarting on other ports"
      slurm_cluster_stop "$d"
      SLURM_CLUSTER_DIR=$d
      mkdir -p "$d/pids"
      rm -rf "$d/state" "$d/log" && mkdir -p "$d/state" "$d/log" && chmod 0755 "$d/log"
      continue
    fi
    break
  done
  _slurm_cluster_say "FAIL: the Slurm cluster in $d did not come up; daemon logs follow"
  _slurm_cluster_logs "$d"
  slurm_cluster_stop "$d"
  return 1
}

# slurm_job_completes JOB OUTPUT [SECONDS]: waits (up to SECONDS, default 120) for
# JOB to end; true when it COMPLETED with exit code 0:0, else prints OUTPUT (the
# job's output file) and its state on stderr and returns 1.
slurm_job_completes() {
  local job=$1 out=$2 secs=${3:-120} state="" i
  for ((i = 0; i < secs * 5; i++)); do
    state=$(scontrol show job "$job" -o 2>/dev/null | head -n 1)
    [[ $state == *"JobState=COMPLETED"* || $state == *"JobState=FAILED"* ||
       $state == *"JobState=CANCELLED"* ]] && break
    sleep 0.2
  done
  [[ $state == *"JobState=COMPLETED"* && $state == *"ExitCode=0:0"* ]] && return 0
  cat "$out" >&2
  echo "job $job: $(grep -o 'JobState=[A-Z]* .*ExitCode=[0-9:]*' <<<"$state")" >&2
  return 1
}
