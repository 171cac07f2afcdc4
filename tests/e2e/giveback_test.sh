#!/usr/bin/env bash
# End-to-end: a pool gives CPUs back without a scavenger partition (no admin
# rights: nothing preempts the pool's workers). On the suite's Slurm cluster
# (tests/e2e/slurm_cluster.sh), an input-bound run in a GPU job on gpu1 (8 CPUs,
# --gres=gpu:1, --mem), while another job fills cpu1, holds elastic worker jobs in
# the cpu partition itself, through `goldminer pool --partition cpu`: they can only
# run on cpu2. A job that needs all of cpu2 then
# waits for Resources; the pool sees it (squeue), its budget falls to what its
# workers hold less what the job wants, the run drains its elastic workers, and
# the job starts. Nothing is lost or made twice, and the record says why.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/slurm_cluster.sh"
GM=$(cd "$(dirname "$GM")" && pwd)/$(basename "$GM")
trap 'slurm_cluster_stop; rm -rf "$T"' EXIT
cd "$T"
command -v sqlite3 >/dev/null || fail "sqlite3 is missing: run scripts/install-deps.sh"
slurm_cluster_start "$T/cluster" >/dev/null || fail "the Slurm cluster did not start"
ok "a Slurm cluster is up"

slow_pipeline "$T/slow.json"
DB=$T/runs.db
"$GM" pool --listen 127.0.0.1:0 --partition cpu --min-lifetime 0 --key-file "$T/pool.key" \
  >"$T/pool.out" 2>"$T/pool.err" &
pool_pid=$!
trap 'kill -9 $pool_pid 2>/dev/null; slurm_cluster_stop; rm -rf "$T"' EXIT
for _ in $(seq 1 100); do pool=$(head -n 1 "$T/pool.out" 2>/dev/null); [[ -n $pool ]] && break; sleep 0.1; done
[[ -n $pool ]] || { cat "$T/pool.err" >&2; fail "the pool printed no address"; }
ok "a pool whose budget is the cpu partition's idle CPUs: $pool"

# Another user's job fills cpu1, so that the run's worker jobs can only go to cpu2.
filler=$(sbatch --parsable -p cpu --nodelist=cpu1 -c 8 --mem=1000M --output=/dev/null --wrap "sleep 900") ||
  fail "sbatch refused the job that fills cpu1"
for _ in $(seq 1 150); do
  [[ $(squeue -h -j "$filler" -o %T 2>/dev/null) == RUNNING ]] && break
  sleep 0.2
done
[[ $(squeue -h -j "$filler" -o %T 2>/dev/null) == RUNNING ]] || fail "the job that fills cpu1 did not start"
ok "another job fills cpu1"

# Epochs one at a time (GOLDMINER_EPOCHS_IN_FLIGHT=off): the check below is that a
# drained worker's splits are never made twice, which holds only then (with epochs
# in flight, a split it holds of the next epoch goes back at the drain: run_test).
cat >"$T/run.sbatch" <<SCRIPT
#!/bin/bash
#SBATCH --partition=gpu --nodelist=gpu1 --nodes=1 --ntasks=1 --cpus-per-task=8 --gres=gpu:1 --mem=6000M
exec env GOLDMINER_EPOCHS_IN_FLIGHT=off "$GM" run --pipeline "$T/slow.json" --workers 1 --autoscale on --min-workers 1 \
  --max-workers 1 --elastic-partition cpu --elastic-max 2 --elastic-cpus 1 \
  --pool $pool --pool-key-file "$T/pool.key" \
  --scale-period 1 --sample-interval 0.25 --samples-per-split 40 --drain-grace 3 \
  --db "$DB" --name giveback -- $PY "$SRC/tests/e2e/trainer.py" "$T/run.json" 1000
SCRIPT
job=$(GM_TEST_UNTIL_FILE=$T/stop GM_TEST_EPOCH_SAMPLES=400 sbatch --parsable --chdir="$T" \
  --output="$T/run.out" --export=ALL "$T/run.sbatch") || fail "sbatch refused the run"
job=${job%%;*}
worker_jobs() { squeue -h -o "%i %T %N %j" 2>/dev/null | awk -v p="goldminer-worker.$job." 'index($4, p) == 1 {print $1, $2, $3}'; }
running=""
for _ in $(seq 1 600); do
  running=$(worker_jobs | awk '$2 == "RUNNING"')
  [[ -n $running ]] && break
  scontrol show job "$job" -o 2>/dev/null | grep -qE "JobState=(COMPLETED|FAILED|CANCELLED)" && break
  sleep 0.2
done
[[ -n $running ]] || { cat "$T/run.out" "$T/pool.err" >&2; fail "no elastic worker job ran"; }
[[ $(awk '{print $3}' <<<"$running" | sort -u) == cpu2 ]] || fail "worker jobs not on cpu2: $running"
ok "the pool granted the run elastic worker jobs in the cpu partition, on cpu2: $(tr '\n' ' ' <<<"$running")"

# A job of the same partition and tier needs all of cpu2: nothing preempts the
# worker jobs, it waits for Resources until the pool gives the CPUs back.
submitted=$(date +%s)
big=$(sbatch --parsable -p cpu --nodelist=cpu2 -c 8 --output=/dev/null --wrap "sleep 1") ||
  fail "sbatch refused the job that needs cpu2"
waited=""
for _ in $(seq 1 300); do
  reason=$(squeue -h -j "$big" -o "%T %r" 2>/dev/null)
  [[ $reason == "PENDING Resources" ]] && waited=1
  [[ -n $waited ]] && break
  sleep 0.2
done
[[ -n $waited ]] || fail "the job did not wait for Resources: '$reason'"
ok "the job that needs cpu2 waits for Resources"
started=""
for _ in $(seq 1 450); do  # the pool asks Slurm every 10 s; the run reports every second
  state=$(scontrol show job "$big" -o 2>/dev/null)
  [[ $state == *"JobState=RUNNING"* || $state == *"JobState=COMPLETED"* ]] && started=1 && break
  sleep 0.2
done
[[ -n $started ]] || { cat "$T/pool.err" "$T/run.out" >&2; fail "the waiting job never started: $(worker_jobs)"; }
ok "the pool gave cpu2 back: the job started $(($(date +%s) - submitted)) s after its submission"
grep -q "jobs waiting for CPUs want 8" "$T/pool.err" || fail "the pool did not say why: $(cat "$T/pool.err")"
ok "the pool said why its budget fell"

touch "$T/stop"
slurm_job_completes "$job" "$T/run.out" || fail "the run's job did not complete"
exactly_once "$T/run.json" 400 || fail "samples lost or repeated: $(cat "$T/run.out")"
ok "every sample of every epoch exactly once"
expect_in "$T/run.out" " 0 splits reassigned" "the given-back workers drained: no split made twice"
drained=$(sqlite3 "$DB" "SELECT count(*) FROM workers WHERE run_id = 'giveback' AND elastic = 1 AND exit LIKE 'drained: %'")
((drained >= 1)) || fail "no elastic worker recorded as drained: $(sqlite3 "$DB" "SELECT * FROM workers")"
why=$(sqlite3 "$DB" "SELECT count(*) FROM pool_grants WHERE run_id = 'giveback' AND extra_workers = 0 AND reason LIKE '%jobs waiting for CPUs want 8%'")
((why >= 1)) || fail "runs.db has no grant of 0 that says why: $(sqlite3 "$DB" "SELECT extra_workers, reason FROM pool_grants")"
ok "runs.db: the elastic worker(s) drained, and the grant of 0 with the pool's reason"
sleep 1
[[ -z $(worker_jobs) ]] || fail "worker jobs left after the run: $(worker_jobs)"
ok "no worker job of the run is left"
scancel "$filler"
quiet_output "$T/run.out" "the run's job" "pool .*(did not answer|went away)"
echo "$checks passed, 0 failed"
