#!/usr/bin/env bash
# End-to-end: workers beyond the allocation (`goldminer run --elastic-partition`)
# on a real Slurm cluster this suite starts and stops (tests/e2e/slurm_cluster.sh:
# a scavenger partition on cpu2, below the cpu and gpu partitions' PriorityTier,
# PreemptMode=CANCEL, GraceTime=5). An input-bound run in a GPU job on gpu1 (2 CPUs,
# --gres=gpu:1, --mem=3000M) whose allocation holds one worker adds worker jobs of
# its own to the scavenger partition; a job of the cpu partition that needs all of
# cpu2 then preempts them: they drain inside the grace, nothing is lost or made
# twice, the record says "preempted", and when the run ends no worker job of it is
# left. Then a run with a pool (grants, their reasons and history recorded), and a
# run whose job is cancelled (no worker job of it left).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/slurm_cluster.sh"
GM=$(cd "$(dirname "$GM")" && pwd)/$(basename "$GM")
trap 'slurm_cluster_stop; rm -rf "$T"' EXIT
cd "$T"
command -v sqlite3 >/dev/null || fail "sqlite3 is missing: run scripts/install-deps.sh"
slurm_cluster_start "$T/cluster" >/dev/null || fail "the Slurm cluster did not start"
ok "a Slurm cluster with a scavenger partition is up"

slow_pipeline "$T/slow.json"  # 400 samples of 10 ms each: about 100 samples/s per worker
DB=$T/runs.db

# Outside Slurm the flag is a clear error, as it is without the autoscaler.
expect_rc 1 "--elastic-partition outside Slurm is refused" -- env -u SLURM_JOB_ID "$GM" run \
  --backend local --pipeline "$T/slow.json" --autoscale on --elastic-partition scavenger \
  --no-db -- /bin/true
expect_in "$T/err" "submits workers as Slurm jobs of their own" "the error says why"

# Epochs one at a time (GOLDMINER_EPOCHS_IN_FLIGHT=off): the check below is that a
# drained worker's splits are never made twice, which holds only then (with epochs
# in flight, a split it holds of the next epoch goes back at the drain: run_test).
cat >"$T/elastic.sbatch" <<SCRIPT
#!/bin/bash
#SBATCH --partition=gpu --nodelist=gpu1 --nodes=1 --ntasks=1 --cpus-per-task=2 --gres=gpu:1 --mem=3000M
exec env GOLDMINER_EPOCHS_IN_FLIGHT=off "$GM" run --pipeline "$T/slow.json" --workers 1 --autoscale on --min-workers 1 \
  --max-workers 1 --elastic-partition scavenger --elastic-max 2 --elastic-cpus 1 \
  --scale-period 1 --sample-interval 0.25 --samples-per-split 40 --drain-grace 3 \
  --db "$DB" --name elastic -- $PY "$SRC/tests/e2e/trainer.py" "$T/elastic.json" 1000
SCRIPT
job=$(GM_TEST_UNTIL_FILE=$T/stop GM_TEST_EPOCH_SAMPLES=400 sbatch --parsable --chdir="$T" \
  --output="$T/elastic.out" --export=ALL "$T/elastic.sbatch") || fail "sbatch refused the job"
job=${job%%;*}

# worker_jobs: "JOBID STATE NODE" of this run's worker jobs (named after the run's job).
worker_jobs() { squeue -h -o "%i %T %N %j" 2>/dev/null | awk -v p="goldminer-worker.$job." 'index($4, p) == 1 {print $1, $2, $3}'; }
# held_jobs: those that hold or wait for CPUs (a COMPLETING job has ended: Slurm
# is cleaning up after it, for as long as its epilog takes on a loaded machine).
held_jobs() { worker_jobs | awk '$2 != "COMPLETING"'; }
# none_left WHAT: no worker job of the run is left; once the run ended them, Slurm
# may list a job as COMPLETING a while, so this waits up to 15 s for the list to empty.
none_left() {
  for _ in $(seq 1 75); do
    [[ -z $(worker_jobs) ]] && return 0
    sleep 0.2
  done
  fail "worker jobs left $1: $(worker_jobs)"
}
running=""
for _ in $(seq 1 600); do
  running=$(worker_jobs | awk '$2 == "RUNNING"')
  registered=$(sqlite3 "$DB" "SELECT count(*) FROM workers WHERE run_id = 'elastic' AND step_id NOT LIKE '$job.%'" 2>/dev/null || echo 0)
  [[ $(wc -l <<<"$running") -ge 1 && -n $running && ${registered:-0} -ge 1 ]] && break
  scontrol show job "$job" -o 2>/dev/null | grep -qE "JobState=(COMPLETED|FAILED|CANCELLED)" && break
  sleep 0.2
done
[[ -n $running ]] || { cat "$T/elastic.out" >&2; fail "no worker job ran beyond the allocation"; }
[[ $(awk '{print $3}' <<<"$running" | sort -u) == cpu2 ]] || fail "worker jobs not on the scavenger partition's cpu2: $running"
ok "the run submitted worker jobs of its own to the scavenger partition: $(tr '\n' ' ' <<<"$running")"
# The worker key is in no process's arguments: srun hands it to a worker in its
# environment (the run's directory is on the run's node only on a real cluster),
# not as the path of a file there; and once read, the worker scrubs it: its
# /proc/PID/environ, which code it runs can read, holds neither.
# A worker of one of this run's worker jobs (other suites' workers may run beside).
wjobs=$(awk '{print $1}' <<<"$running" | paste -sd '|')
pid=""
for _ in $(seq 1 100); do
  for p in $(pgrep -f "goldminer worker --coordinator"); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qxE "SLURM_JOB_ID=($wjobs)" && { pid=$p; break; }
  done
  [[ -n $pid ]] && break
  sleep 0.1
done
[[ -n $pid ]] || fail "no worker process of worker jobs $wjobs"
key=""
for p in $(pgrep -f "srun --partition=scavenger"); do
  key=$(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | sed -n 's/^GOLDMINER_SECRET=//p')
  [[ $key =~ ^[0-9a-f]{64}$ ]] && break
done
[[ $key =~ ^[0-9a-f]{64}$ ]] || fail "no srun of a worker job hands a key in its environment"
# The worker scrubs it as it starts, right after reading it: a process found the
# moment it was exec'd may not have yet, so wait (bounded) for it to be gone.
for _ in $(seq 1 100); do
  grep -qF "$key" "/proc/$pid/environ" 2>/dev/null || break
  sleep 0.1
done
! grep -qF "$key" "/proc/$pid/environ" 2>/dev/null ||
  fail "the worker (pid $pid) kept its key in its environ 10 s after it started"
! tr '\0' '\n' <"/proc/$pid/environ" | grep -qE '^GOLDMINER_SECRET(_FILE)?=.' ||
  fail "the worker (pid $pid) still names a key or a key file in its environ"
! ps -eo args | grep -qF -f <(printf "%s\n" "$key") || fail "the worker key is on a command line"
ok "the worker key reached the worker in its environment, on no command line, and left its environ once read"

# A job of the cpu partition needs all of cpu2: Slurm preempts the worker jobs there.
big=$(sbatch --parsable -p cpu --nodelist=cpu2 -c 8 --output=/dev/null --wrap "sleep 2") ||
  fail "sbatch refused the preempting job"
preempted=0
for _ in $(seq 1 600); do  # preemption takes 8-22 s to begin on this cluster
  preempted=$(sqlite3 "$DB" "SELECT count(*) FROM workers WHERE run_id = 'elastic' AND exit LIKE 'preempted: %'" 2>/dev/null || echo 0)
  ((${preempted:-0} >= 1)) && break
  sleep 0.2
done
((${preempted:-0} >= 1)) || { cat "$T/elastic.out" >&2; fail "no worker recorded as preempted: $(sqlite3 "$DB" "SELECT * FROM workers WHERE run_id = 'elastic'")"; }
ok "Slurm preempted the worker jobs for job $big; the run recorded $preempted worker(s) as preempted"
for _ in $(seq 1 300); do
  scontrol show job "$big" -o 2>/dev/null | grep -qE "JobState=(COMPLETED|FAILED|CANCELLED)" && break
  sleep 0.2
done
ok "the preempting job ran"

touch "$T/stop"
slurm_job_completes "$job" "$T/elastic.out" || fail "the run's job did not complete"
ok "the run's job COMPLETED"
$PY - "$T/elastic.json" <<'PY' || fail "samples lost or repeated: $(cat "$T/elastic.out")"
import json, sys
r = json.load(open(sys.argv[1]))
assert "error" not in r, r
epochs = r["epochs"]
assert len(epochs) >= 2, len(epochs)
for e, keys in enumerate(epochs):
    assert len(keys) == len(set(keys)) == 400, (e, len(keys), len(set(keys)))
PY
ok "every sample of every epoch arrived exactly once, across the preemption"
expect_in "$T/elastic.out" " 0 splits reassigned" "the preempted workers drained: no split made twice"
none_left "after the run"
ok "no worker job of the run is left"
# Slurm says it cancelled the steps of the worker jobs it preempted on cpu2: the
# event this test provokes, in Slurm's words; nothing else may warn.
quiet_output "$T/elastic.out" "the elastic GPU job, preempted workers and all" \
  "^slurmstepd-cpu2: error: \\*\\*\\* STEP [0-9]+\\.[0-9]+ ON cpu2 CANCELLED AT [0-9T:-]+ (DUE TO PREEMPTION )?\\*\\*\\*$"
# The record: each worker job marked elastic, with a job of its own; the report
# marks the preemptions on the workers chart.
elastic_rows=$(sqlite3 "$DB" "SELECT count(*) FROM workers WHERE run_id = 'elastic' AND elastic = 1 AND step_id NOT LIKE '$job.%' AND host = 'cpu2'")
own_rows=$(sqlite3 "$DB" "SELECT count(*) FROM workers WHERE run_id = 'elastic' AND elastic = 0 AND step_id LIKE '$job.%'")
((elastic_rows >= 1 && own_rows >= 1)) || fail "runs.db: $(sqlite3 "$DB" "SELECT * FROM workers WHERE run_id = 'elastic'")"
ok "runs.db marks the $elastic_rows worker job(s) elastic (own job ids, on cpu2), the allocation's $own_rows not"
expect_rc 0 "report of the elastic run" -- "$GM" report --db "$DB" --run elastic -o "$T/elastic.html"
grep -qE 'data-preempted="[1-9]' "$T/elastic.html" || fail "the report marks no preemption: $(grep -o 'data-decisions[^>]*' "$T/elastic.html")"
grep -qF "<td>elastic job</td>" "$T/elastic.html" || fail "the report's workers table names no elastic job"
ok "the report marks the preemptions on the workers chart and names the elastic jobs"

# With a pool of 1 CPU: the run reports to it and holds at most the one elastic
# worker granted, though --elastic-max allows 2; the pool killed with -9 mid-run
# costs the run nothing.
"$GM" pool --listen 127.0.0.1:0 --cpus 1 --min-lifetime 0 --key-file "$T/pool.key" \
  >"$T/pool.out" 2>"$T/pool.err" &
pool_pid=$!
trap 'kill -9 $pool_pid 2>/dev/null; slurm_cluster_stop; rm -rf "$T"' EXIT
for _ in $(seq 1 100); do pool=$(head -n 1 "$T/pool.out" 2>/dev/null); [[ -n $pool ]] && break; sleep 0.1; done
[[ -n $pool ]] || { cat "$T/pool.err" >&2; fail "the pool printed no address"; }
sed -e "s|--name elastic|--name pooled --pool $pool --pool-key-file $T/pool.key|" \
    -e "s|$T/elastic.json|$T/pooled.json|" "$T/elastic.sbatch" >"$T/pooled.sbatch"
rm -f "$T/stop"
job=$(GM_TEST_UNTIL_FILE=$T/stop GM_TEST_EPOCH_SAMPLES=400 sbatch --parsable --chdir="$T" \
  --output="$T/pooled.out" --export=ALL "$T/pooled.sbatch") || fail "sbatch refused the pooled job"
job=${job%%;*}
granted=""
most=0
for _ in $(seq 1 600); do
  n=$(held_jobs | wc -l)
  ((n > most)) && most=$n
  granted=$("$GM" -q pool --status "$pool" --key-file "$T/pool.key" 2>/dev/null | awk '$1 == "pooled" {print $3}')
  [[ $granted == 1 ]] && [[ $(held_jobs | awk '$2 == "RUNNING"' | wc -l) -ge 1 ]] && break
  scontrol show job "$job" -o 2>/dev/null | grep -qE "JobState=(COMPLETED|FAILED|CANCELLED)" && break
  sleep 0.2
done
[[ $granted == 1 ]] || { cat "$T/pooled.out" "$T/pool.err" >&2; fail "the pool granted '$granted', not 1"; }
ok "the run reported to the pool, which granted it its 1 CPU: one elastic worker"
for _ in $(seq 1 25); do  # a few scale periods more: the autoscaler still asks, the grant holds
  n=$(held_jobs | wc -l); ((n > most)) && most=$n
  sleep 0.2
done
((most <= 1)) || fail "$most worker jobs at once with a grant of 1"
ok "never more worker jobs than the pool granted ($most at most)"
expect_rc 0 "pool --status" -- "$GM" -q pool --status "$pool" --key-file "$T/pool.key"
expect_in "$T/out" "pooled 0 -> 1 CPUs: divided anew: a budget of 1 CPUs over 1 run(s)" \
  "pool --status shows the grant's change and the pool's reason"
kill -9 "$pool_pid"
sleep 3
touch "$T/stop"
slurm_job_completes "$job" "$T/pooled.out" || fail "the pooled run's job did not complete"
exactly_once "$T/pooled.json" 400 || fail "samples lost or repeated in the pooled run"
ok "the pool killed with -9 mid-run cost the run nothing: it COMPLETED, every sample once"
expect_in "$T/pooled.out" "did not answer" "the run said the pool went away, and went on"
none_left "after the pooled run"
ok "no worker job of the pooled run is left"
quiet_output "$T/pooled.out" "the pooled run's job" "pool .*(did not answer|went away)"
grants=$(sqlite3 "$DB" "SELECT count(*) FROM pool_grants WHERE run_id = 'pooled' AND extra_workers = 1 AND cpus = 1 AND reason LIKE 'divided anew: %' AND json_extract(report, '\$.run_id') = 'pooled'")
((grants >= 1)) || fail "runs.db has no pool grant of 1 worker: $(sqlite3 "$DB" "SELECT * FROM pool_grants")"
ok "runs.db records the pool's grant with its reason and the report it answered"
expect_rc 0 "report of the pooled run" -- "$GM" report --db "$DB" --run pooled --format text
expect_in "$T/out" "the pool's grant changed" "the report says what the pool granted"

# A run whose job is cancelled leaves no worker job behind.
sed -e "s|--name elastic|--name cancelled|" -e "s|$T/elastic.json|$T/cancelled.json|" \
  "$T/elastic.sbatch" >"$T/cancelled.sbatch"
rm -f "$T/stop"
job=$(GM_TEST_UNTIL_FILE=$T/stop GM_TEST_EPOCH_SAMPLES=400 sbatch --parsable --chdir="$T" \
  --output="$T/cancelled.out" --export=ALL "$T/cancelled.sbatch") || fail "sbatch refused the job to cancel"
job=${job%%;*}
for _ in $(seq 1 600); do
  [[ -n $(worker_jobs) ]] && break
  sleep 0.2
done
[[ -n $(worker_jobs) ]] || { cat "$T/cancelled.out" >&2; fail "the run to cancel submitted no worker job"; }
scancel "$job"
for _ in $(seq 1 300); do
  [[ -z $(worker_jobs) ]] && ! squeue -h -j "$job" 2>/dev/null | grep -q . && break
  sleep 0.2
done
[[ -z $(worker_jobs) ]] || fail "worker jobs left after the run's job was cancelled: $(worker_jobs)"
ok "the run's job cancelled (scancel): no worker job of it is left"

# A pool whose budget is the scavenger partition's idle CPUs (cpu2's 8), as sinfo says.
"$GM" pool --listen 127.0.0.1:0 --partition scavenger --key-file "$T/pool.key" \
  >"$T/pool2.out" 2>"$T/pool2.err" &
pool_pid=$!
for _ in $(seq 1 100); do pool=$(head -n 1 "$T/pool2.out" 2>/dev/null); [[ -n $pool ]] && break; sleep 0.1; done
[[ -n $pool ]] || { cat "$T/pool2.err" >&2; fail "the pool (--partition) printed no address"; }
expect_rc 0 "pool --partition: --status" -- "$GM" pool --status "$pool" --key-file "$T/pool.key"
expect_in "$T/out" "pool: 8 CPUs" "its budget is the scavenger partition's idle CPUs"
expect_rc 1 "pool --partition of no such partition" -- \
  "$GM" pool --listen 127.0.0.1:0 --partition nosuch --key-file "$T/pool.key"
expect_in "$T/err" "nosuch" "the error names the partition"
echo "$checks passed, 0 failed"
