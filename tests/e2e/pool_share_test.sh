#!/usr/bin/env bash
# End-to-end: two input-bound runs in two Slurm jobs share one pool (tests/e2e/
# slurm_cluster.sh's cluster; each run a GPU job on gpu1 with --mem, its worker jobs in
# the scavenger partition on cpu2).
# Run A's worker makes up to 100 samples/s for a trainer that takes about 150; run
# B's makes 50 for one that takes about 500 (a tenth of it a worker). The pool
# divides 3 CPUs: A gets what reaches its demand (one worker, two on a loaded
# machine where a worker makes 50-75), B the rest; both get worker jobs. (A trainer
# of 300 needed four workers at 78 a worker: the pool then rightly gave A all three
# CPUs and B none; a trainer of 100, as fast as its one worker, rightly got none,
# and B all three: neither can be told from a pool that never divides.) The
# division the pool answers is checked against a hand computation from the
# inputs it shows (pool --status --json: each run's last report), and every sample
# of every epoch of both runs arrives exactly once.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/slurm_cluster.sh"
GM=$(cd "$(dirname "$GM")" && pwd)/$(basename "$GM")
trap 'slurm_cluster_stop; rm -rf "$T"' EXIT
cd "$T"
slurm_cluster_start "$T/cluster" >/dev/null || fail "the Slurm cluster did not start"
ok "a Slurm cluster with a scavenger partition is up"

"$GM" pool --listen 127.0.0.1:0 --cpus 3 --min-gain 0 --min-lifetime 0 --check-gpus slurm \
  --key-file "$T/pool.key" >"$T/pool.out" 2>"$T/pool.err" &
pool_pid=$!
trap 'kill -9 $pool_pid 2>/dev/null; slurm_cluster_stop; rm -rf "$T"' EXIT
for _ in $(seq 1 100); do pool=$(head -n 1 "$T/pool.out" 2>/dev/null); [[ -n $pool ]] && break; sleep 0.1; done
[[ -n $pool ]] || { cat "$T/pool.err" >&2; fail "the pool printed no address"; }

# Epochs of 1,200 samples (30 splits): an epoch ends at a barrier (the next
# begins when the trainer took this one's last batch), and with few splits an
# epoch's tail leaves workers idle, so a run's measured rate would grow by less
# than its workers add and the curves the pool divides by would flatten.
EPOCH=1200
# submit NAME SLEEP_S STEP_S: a run whose samples take SLEEP_S each to make and
# whose trainer takes STEP_S per batch of 10; prints its job id.
submit() {
  mkdir -p "$T/$1"
  sleepy_pipeline "$T/$1/pipeline.json" $EPOCH "$2"
  cat >"$T/$1.sbatch" <<SCRIPT
#!/bin/bash
#SBATCH --partition=gpu --nodelist=gpu1 --nodes=1 --ntasks=1 --cpus-per-task=2 --gres=gpu:1 --mem=2000M
exec "$GM" run --pipeline "$T/$1/pipeline.json" --workers 1 --autoscale on --min-workers 1 \
  --max-workers 1 --elastic-partition scavenger --elastic-max 4 --elastic-cpus 1 \
  --pool $pool --pool-key-file "$T/pool.key" \
  --scale-period 1 --sample-interval 0.25 --samples-per-split 40 --drain-grace 3 \
  --no-db --name $1 -- $PY "$SRC/tests/e2e/trainer.py" "$T/$1.json" 1000
SCRIPT
  local job
  job=$(GM_TEST_UNTIL_FILE=$T/stop GM_TEST_EPOCH_SAMPLES=$EPOCH GM_TEST_STEP_S=$3 sbatch --parsable \
    --chdir="$T" --output="$T/$1.out" --export=ALL "$T/$1.sbatch") || fail "sbatch refused run $1"
  echo "${job%%;*}"
}
job_a=$(submit a 0.01 0.066)
job_b=$(submit b 0.02 0.02)

# The division against a hand computation from the inputs the pool shows: each
# run's curve (planner/pool_state.h: speed = rate / demand at each count, an
# unmeasured count adds what the last measured worker added, slopes made to fall),
# then the steepest CPUs first, weighted by GPUs; what runs hold is kept when it
# is worth as much (--min-gain 0). Exit 0: checked; 2: not yet (a run has no grant).
cat >"$T/hand.py" <<'PY'
import json, sys
state = json.load(open(sys.argv[1]))
budget = state["cpus"]
runs = {r["run_id"]: r for r in state["runs"]}
if set(runs) != {"a", "b"} or any("report" not in r for r in runs.values()):
    sys.exit(2)
def curve(rep):
    per, base = rep["cpus_per_worker"], rep["base_workers"]
    measured = {w: min(1.0, rate / rep["demand_samples_per_s"]) for w, rate in rep["rates"]}
    if base in measured:
        speed = measured[base]
    elif base > 0:
        return []
    else:
        speed = 0.0
    step = speed / base if base > 0 else 0.0
    pieces, last = [], float("inf")
    for k in range(1, budget // per + 1):
        if speed >= 1:
            break
        if base + k in measured:
            nxt = max(speed, measured[base + k]); step = nxt - speed
        else:
            nxt = min(1.0, speed + step)
        slope = min(last, (nxt - speed) / per)
        if not slope > 0:
            break
        pieces.append((slope, per))
        last = slope
        speed += slope * per
    return pieces
def value(rid, cpus):
    v = 0.0
    for slope, n in curves[rid]:
        take = min(cpus, n); v += take * slope; cpus -= take
    return runs[rid]["report"]["gpus"] * v
curves = {rid: curve(r["report"]) for rid, r in runs.items()}
pieces = sorted(((s * runs[rid]["report"]["gpus"], i, rid, n) for i, rid in enumerate(sorted(runs))
                 for s, n in curves[rid]), key=lambda p: (-p[0], p[1]))
best, left = {rid: 0 for rid in runs}, budget
for _, _, rid, n in pieces:
    take = min(left, n); best[rid] += take; left -= take
held = {rid: min(budget, r["report"]["extra_workers"] * r["report"]["cpus_per_worker"])
        for rid, r in runs.items()}
if sum(held.values()) <= budget and sum(value(r, held[r]) for r in runs) >= sum(value(r, best[r]) for r in runs):
    best = held
got = {rid: r["cpus"] for rid, r in runs.items()}
want = {rid: best[rid] // runs[rid]["report"]["cpus_per_worker"] * runs[rid]["report"]["cpus_per_worker"] for rid in runs}
if got != want:
    print(f"the pool divided {got}, by hand {want}; curves {curves}; held {held}; state {json.dumps(state)}")
    sys.exit(1)
if min(got.values()) == 0:
    sys.exit(2)
first = {rid: (curves[rid][0][0] if curves[rid] else 0) for rid in runs}
print(f"pool {got} = hand {want}; first extra CPU adds a {first['a']:.3f}, b {first['b']:.3f} of its GPUs' speed; curves {curves}; rates a {runs['a']['report']['rates']} b {runs['b']['report']['rates']}")
PY
# Five snapshots a second apart once both hold workers: the inputs move (new
# counts measured, rates averaged anew); each division must match.
checked=0
for _ in $(seq 1 300); do
  "$GM" -q pool --status "$pool" --key-file "$T/pool.key" --json >"$T/now.json" 2>/dev/null || { sleep 0.3; continue; }
  $PY "$T/hand.py" "$T/now.json" >"$T/now.out"
  rc=$?
  ((rc == 1)) && fail "$(cat "$T/now.out")"
  if ((rc == 0)); then
    checked=$((checked + 1))
    ((checked == 1)) && cp "$T/now.json" "$T/state.json" && cp "$T/now.out" "$T/hand.out"
    ((checked == 5)) && break
    sleep 1
    continue
  fi
  sleep 0.3
done
((checked >= 1)) || { cat "$T/now.json" "$T/a.out" "$T/b.out" >&2; fail "the pool never granted both runs workers"; }
ok "both runs hold pool workers, as divided by hand ($checked snapshots): $(cat "$T/hand.out")"
# The run whose next worker adds more gets more workers, unless it needs fewer
# (its curve reaches its demand within what it got).
$PY - "$T/state.json" "$T/hand.out" >"$T/steep.out" <<'PY' || fail "the steeper run got fewer workers: $(cat "$T/state.json")"
import json, sys
runs = {r["run_id"]: r for r in json.load(open(sys.argv[1]))["runs"]}
line = open(sys.argv[2]).read()
curves = eval(line.split("curves ", 1)[1].split("; rates", 1)[0])  # printed by hand.py
first = {rid: c[0][0] * runs[rid]["report"]["gpus"] if c else 0 for rid, c in curves.items()}
steep, other = sorted(runs, key=lambda rid: -first[rid])
needs = sum(n for _, n in curves[steep])
got = {rid: r["cpus"] for rid, r in runs.items()}
if needs > got[steep]:
    assert got[steep] >= got[other], (steep, got, curves)
print(f"{steep} (first worker adds {first[steep]:.3f}) got {got[steep]} CPU(s) of the {needs} its curve"
      f" wants; {other} (adds {first[other]:.3f}) got {got[other]}")
PY
ok "the run whose rate grows more per worker got more, or all it wants: $(cat "$T/steep.out")"
# Attack (goldminer-pool(1) SECURITY), a peer holding the pool key written from the
# man pages: a report claiming 65,536 GPUs inside run a's real job (one GPU, as
# squeue says) is counted as 1 GPU; one naming a job that is not running is refused.
$PY - "$pool" "$T/pool.key" "$job_a" >"$T/liar.out" 2>&1 <<PY || { cat "$T/liar.out" "$T/pool.err" >&2; fail "the GPU claim"; }
import json, socket, subprocess, sys
sys.path.insert(0, "$SRC/tests")
import gmp_wire as w
POOL_REPORT, POOL_GRANT = 43, 44
host, port = sys.argv[1].rsplit(":", 1)
secret = open(sys.argv[2]).read().strip()
def report(run_id, job):
    s = socket.create_connection((host, int(port)), timeout=30)
    w.client_handshake(s, w.role_key(secret, "run"), "run")
    w.send_frame(s, POOL_REPORT, {"run_id": run_id, "gpus": 65536, "cpus_per_worker": 1,
                                  "base_workers": 1, "extra_workers": 0,
                                  "demand_samples_per_s": 1e12, "rates": [[1, 1e6]],
                                  "slurm_job": job})
    kind, meta, _ = w.recv_frame(s)
    s.close()
    return kind, meta
kind, meta = report("liar", sys.argv[3])
assert kind == POOL_GRANT, meta
kind, meta = report("ghost", "999999")
assert kind == w.ERROR and "names Slurm job 999999" in meta["message"], meta
state = json.loads(subprocess.run(["$GM", "-q", "pool", "--status", sys.argv[1], "--key-file",
                                   sys.argv[2], "--json"], capture_output=True, text=True,
                                  check=True).stdout)
gpus = {r["run_id"]: r["gpus"] for r in state["runs"]}
assert gpus.get("liar") == 1 and "ghost" not in gpus, gpus
print(f"the GPUs the pool counts: {gpus}; the ghost job: {meta['message']}")
PY
ok "a report claiming 65,536 GPUs counts its job's 1, a job not running is refused: $(tail -n 1 "$T/liar.out")"
expect_in "$T/pool.err" "pool: run liar reports 65536 GPUs; it is counted as 1, what its Slurm job $job_a holds" \
  "the pool says it cut the claim"

worker_jobs() { squeue -h -o "%i %T %N %j" 2>/dev/null | awk 'index($4, "goldminer-worker.") == 1 {print $1, $2, $3}'; }

touch "$T/stop"
slurm_job_completes "$job_a" "$T/a.out" || fail "run a's job did not complete"
slurm_job_completes "$job_b" "$T/b.out" || fail "run b's job did not complete"
exactly_once "$T/a.json" $EPOCH || fail "run a lost or repeated samples: $(cat "$T/a.out")"
exactly_once "$T/b.json" $EPOCH || fail "run b lost or repeated samples: $(cat "$T/b.out")"
ok "every sample of every epoch exactly once in both runs"
sleep 1
[[ -z $(worker_jobs) ]] || fail "worker jobs left after the runs: $(worker_jobs)"
ok "no worker job of either run is left"
quiet_output "$T/a.out" "run a's GPU job"
quiet_output "$T/b.out" "run b's GPU job"
echo "$checks passed, 0 failed"
