#!/usr/bin/env bash
# End-to-end: the private Slurm cluster the plan and run tests use
# (tests/e2e/slurm_cluster.sh) comes up with its four nodes, runs a GPU step,
# accepts a heterogeneous job across both partitions, refuses an unknown
# partition, and stops every daemon it started.
# Usage: bash slurm_cluster_test.sh [GOLDMINER BUILD_DIR] (both unused here).
set -euo pipefail
# shellcheck source=tests/e2e/slurm_cluster.sh
source "$(dirname "$0")/slurm_cluster.sh"

D=$(mktemp -d "${TMPDIR:-/tmp}/goldminer-slurm-XXXXXX")
trap 'slurm_cluster_stop; rm -rf "$D"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
checks=0

fail() {
  echo "FAIL: $*" >&2
  for f in "$D/out" "$D/err"; do
    [[ -s $f ]] && { echo "--- $(basename "$f"):" >&2; cat "$f" >&2; }
  done
  exit 1
}
ok() { checks=$((checks + 1)); echo "ok $checks - $*"; }

slurm_cluster_start "$D/cluster" || fail "the Slurm cluster did not start (see above)"
ok "4 nodes idle (slurmctld port $SLURM_CLUSTER_PORT)"

# The nodes as configured.
timeout 30 scontrol show node --oneliner >"$D/out" 2>"$D/err" || fail "scontrol show node"
[[ $(grep -c '^NodeName=' "$D/out") == 4 ]] || fail "scontrol lists $(grep -c '^NodeName=' "$D/out") nodes, expected 4"
for n in gpu1 gpu2 cpu1 cpu2; do
  line=$(grep "^NodeName=$n " "$D/out") || fail "node $n missing"
  gres='(null)' part=cpu
  [[ $n == gpu* ]] && gres=gpu:2 part=gpu
  [[ $n == cpu2 ]] && part=cpu,scavenger
  for want in CPUTot=8 RealMemory=16000 "Gres=$gres" "Partitions=$part" State=IDLE; do
    [[ " $line " == *" $want "* ]] || fail "node $n: '$want' not in: $line"
  done
done
ok "scontrol lists gpu1 gpu2 (Gres=gpu:2) and cpu1 cpu2, CPUs=8 RealMemory=16000, all idle"
# The scavenger partition: below the others' tier, its jobs cancelled after a grace.
timeout 30 scontrol show partition scavenger --oneliner >"$D/out" 2>"$D/err" || fail "no scavenger partition"
for want in Nodes=cpu2 PriorityTier=1 PreemptMode=CANCEL GraceTime=5; do
  grep -q " $want " "$D/out" || fail "scavenger: '$want' not in: $(cat "$D/out")"
done
timeout 30 scontrol show partition cpu --oneliner | grep -q " PriorityTier=2 " ||
  fail "the cpu partition is not above the scavenger's tier"
ok "a scavenger partition on cpu2, PriorityTier 1 below cpu and gpu's 2, PreemptMode=CANCEL, GraceTime=5"

# A step on a fake GPU sees it as device 0.
# shellcheck disable=SC2016
timeout 60 srun -p gpu --gres=gpu:1 bash -c 'echo $CUDA_VISIBLE_DEVICES' >"$D/out" 2>"$D/err" ||
  fail "srun -p gpu --gres=gpu:1 exited $?"
[[ $(<"$D/out") == 0 ]] || fail "CUDA_VISIBLE_DEVICES in a --gres=gpu:1 step is '$(<"$D/out")', expected 0"
ok "srun -p gpu --gres=gpu:1 gets CUDA_VISIBLE_DEVICES=0"

if ((SLURM_CLUSTER_UTS)); then
  timeout 60 srun -p cpu -w cpu2 hostname >"$D/out" 2>"$D/err" || fail "srun -w cpu2 hostname exited $?"
  [[ $(<"$D/out") == cpu2 ]] || fail "hostname on cpu2 is '$(<"$D/out")', expected cpu2"
  ok "a step on cpu2 runs with hostname cpu2"
fi

# A heterogeneous job: one GPU task in gpu, two 2-CPU tasks in cpu.
cat >"$D/het.sh" <<'SH'
#!/bin/bash
#SBATCH -p gpu --gres=gpu:1 --ntasks=1
#SBATCH hetjob
#SBATCH -p cpu --ntasks=2 --cpus-per-task=2
srun --het-group=0,1 true
SH
timeout 30 sbatch --test-only "$D/het.sh" >"$D/out" 2>"$D/err" || fail "sbatch --test-only of a hetjob exited $?"
grep -q 'to start at' "$D/err" || fail "sbatch --test-only of a hetjob did not say when it would start"
ok "sbatch --test-only accepts a hetjob (gpu --gres=gpu:1 + cpu --ntasks=2 --cpus-per-task=2)"

# An unknown partition is refused at submission.
if timeout 30 sbatch --test-only -p nosuch --wrap true >"$D/out" 2>"$D/err"; then
  fail "sbatch --test-only -p nosuch was accepted"
fi
grep -qi 'invalid partition' "$D/err" || fail "sbatch -p nosuch refused without naming the partition"
ok "sbatch --test-only -p nosuch is refused (invalid partition)"

# Stopping ends every daemon started, and is idempotent.
daemon_pids=$(cat "$D/cluster/pids/"*)
slurm_cluster_stop
slurm_cluster_stop
for p in $daemon_pids; do
  if [[ -e /proc/$p ]] && ! grep -q '^State:[[:space:]]*Z' "/proc/$p/status" 2>/dev/null; then
    fail "pid $p ($(tr '\0' ' ' <"/proc/$p/cmdline")) still runs after slurm_cluster_stop"
  fi
done
[[ -z ${SLURM_CONF:-} || $SLURM_CONF != "$D/cluster/slurm.conf" ]] || fail "SLURM_CONF still names the stopped cluster"
ok "slurm_cluster_stop ends all 6 daemons (twice is harmless)"

# With SLURM_CLUSTER_NETNS=1 each node is a host of its own on the network: a step
# on cpu1 has cpu1's address, reaches a listener on gpu1 by gpu1's address, and
# cannot reach it at 127.0.0.1 (loopback is the node's own). Stopping removes the
# namespaces and the bridge.
SLURM_CLUSTER_NETNS=1
slurm_cluster_start "$D/netns" || fail "the Slurm cluster with network namespaces did not start"
subnet=$(sed -n 's/^SlurmctldHost=.*(\(.*\)\.1)$/\1/p' "$SLURM_CONF")
[[ -n $subnet ]] || fail "no subnet in $SLURM_CONF"
port=$((SLURM_CLUSTER_PORT + 10))
# A listener on gpu1 (a step that runs while another step connects to it).
cat >"$D/net.sh" <<SH
#!/bin/bash
#SBATCH -p gpu --ntasks=1
#SBATCH hetjob
#SBATCH -p cpu --ntasks=1
srun --het-group=0 /usr/bin/python3 -c '
import socket
s = socket.create_server(("0.0.0.0", $port)); s.settimeout(20)
c, _ = s.accept(); c.sendall(b"hello from gpu1"); c.close()' &
srun --het-group=1 /usr/bin/python3 -c '
import socket, time
def get(host):  # the listener may not be up yet: retry for 10 s
    for _ in range(100):
        try:
            with socket.create_connection((host, $port), timeout=2) as c:
                return c.recv(64).decode()
        except OSError as e:
            err = str(e)
            time.sleep(0.1)
    return "error: " + err
print("gpu1", get("$subnet.11"))'
wait
SH
( cd "$D" && timeout 60 srun -p cpu -w cpu1 hostname -I ) >"$D/out" 2>"$D/err" || fail "srun on cpu1 exited $?"
[[ $(tr -d ' \n' <"$D/out") == "$subnet.13" ]] || fail "cpu1's address is '$(<"$D/out")', expected $subnet.13"
ok "a step on cpu1 has cpu1's own address ($subnet.13)"
# shellcheck disable=SC2016
timeout 60 srun -p cpu -w cpu1 /usr/bin/python3 -c '
import socket, sys
try:
    socket.create_connection(("'"$subnet"'.1", '"$SLURM_CLUSTER_PORT"'), timeout=5).close()
    print("reached")
except OSError as e:
    print("refused", e)' >"$D/out" 2>"$D/err" || fail "srun on cpu1 (connect to slurmctld) exited $?"
[[ $(<"$D/out") == reached ]] || fail "cpu1 cannot reach slurmctld at $subnet.1: $(<"$D/out")"
job=$(sbatch --parsable --output="$D/net.out" "$D/net.sh") || fail "sbatch of the two-node job"
job=${job%%;*}
for _ in $(seq 1 150); do
  state=$(scontrol show job "$job" -o | head -n 1)
  [[ $state == *"JobState=COMPLETED"* || $state == *"JobState=FAILED"* ]] && break
  sleep 0.2
done
grep -q "^gpu1 hello from gpu1$" "$D/net.out" || fail "cpu1 did not reach gpu1 at $subnet.11: $(cat "$D/net.out")"
ok "a step on cpu1 reaches a listener on gpu1 at gpu1's address over the bridge"
# shellcheck disable=SC2016
timeout 60 srun -p cpu -w cpu1 /usr/bin/python3 -c '
import socket
try:
    socket.create_connection(("127.0.0.1", '"$SLURM_CLUSTER_PORT"'), timeout=2).close()
    print("reached")
except OSError:
    print("unreachable")' >"$D/out" 2>"$D/err" || fail "srun on cpu1 (loopback) exited $?"
[[ $(<"$D/out") == unreachable ]] || fail "slurmctld's port is reachable at 127.0.0.1 from cpu1"
ok "loopback is the node's own: the host's slurmctld is not at 127.0.0.1 from cpu1"
bridge=gmbr$SLURM_CLUSTER_PORT
slurm_cluster_stop
ip link show "$bridge" >/dev/null 2>&1 && fail "bridge $bridge left after slurm_cluster_stop"
[[ -z $(ip netns list | grep "^gm$SLURM_CLUSTER_PORT-") ]] || fail "namespaces left: $(ip netns list)"
ok "slurm_cluster_stop removes the namespaces and the bridge"

echo "$checks passed, 0 failed"
