#!/usr/bin/env bash
# End-to-end: the coordinator of a run dies mid-epoch (kill -9 of its process,
# `goldminer coordinator`, run's child). Run starts it again on the same address
# from its journal; the workers and the trainer come back to it in their ids and
# session, and every sample reaches the trainer exactly once. A journal found
# corrupted is not replayed: the run fails saying where. Locally, then on the
# suite's Slurm cluster as a GPU job with --mem, its workers job steps.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/slurm_cluster.sh"
trap 'slurm_cluster_stop; [[ -n ${KEEP:-} ]] && cp -r "$T" /tmp/crash-keep; rm -rf "$T"' EXIT

sleepy_pipeline "$T/pipeline.json" 1200 0.001
DB=$T/runs.db

# 1. Local: killed twice, in epoch 0 and in epoch 1.
GM_TEST_KILL_COORDINATOR_AFTER=5,150 run_trainer revived "with its coordinator killed twice" -- \
  --backend local --pipeline "$T/pipeline.json" --workers 2 --epochs 2 --samples-per-split 20 \
  --db "$DB" --name revived -- $PY "$SRC/tests/e2e/trainer.py" "$T/revived.json" 2
ok "a run whose coordinator was killed twice ends"
exactly_once "$T/revived.json" 1200 || { cat "$T/revived.err" >&2; fail "samples lost or repeated"; }
ok "every sample of both epochs reached the trainer exactly once"
[[ $(grep -cE "starting it again on .* from its journal" "$T/revived.err") == 2 ]] ||
  { cat "$T/revived.err" >&2; fail "run did not say twice that it started the coordinator again"; }
ok "run says each time that it started the coordinator again from its journal"
[[ $(sqlite3 "$DB" "SELECT status FROM runs WHERE id = 'revived'") == succeeded ]] ||
  fail "runs.db: $(sqlite3 "$DB" "SELECT status FROM runs WHERE id = 'revived'")"
sqlite3 "$DB" "SELECT message FROM events WHERE run_id = 'revived'" |
  grep -q "started again from its journal 2 time(s)" ||
  fail "runs.db events: $(sqlite3 "$DB" "SELECT message FROM events WHERE run_id = 'revived'")"
ok "runs.db: succeeded, and the coordinator's two restarts recorded"
# The kills are the only thing said: no worker was lost, nothing made twice.
quiet_output "$T/revived.err" "a run whose coordinator was killed" \
  "the coordinator \(pid [0-9]+\) was killed by signal 9"

# 2. A journal corrupted before the kill: not replayed; the run fails naming it.
if GM_TEST_KILL_COORDINATOR_AFTER=5 GM_TEST_CORRUPT_JOURNAL=1 gm_run corrupt -- --backend local \
  --pipeline "$T/pipeline.json" --workers 2 --epochs 1 --samples-per-split 20 --no-db -- \
  $PY "$SRC/tests/e2e/trainer.py" "$T/corrupt.json" 1; then
  cat "$T/corrupt.err" >&2
  fail "a run whose coordinator's journal was corrupted succeeded"
fi
[[ $? != 124 ]] || fail "a run whose coordinator's journal was corrupted hung"
expect_in "$T/corrupt.err" "coordinator.journal:1: corrupted" \
  "the run fails naming the journal's corrupted line"

# 3. Slurm: a GPU job with --mem; its workers are job steps; the coordinator is
#    killed mid-epoch and comes back; every sample once.
slurm_cluster_start "$T/cluster" >/dev/null || fail "the Slurm cluster did not start"
cat >"$T/slurm.sbatch" <<SCRIPT
#!/bin/bash
#SBATCH --partition=gpu --nodes=1 --ntasks=1 --cpus-per-task=4 --gres=gpu:1 --mem=4000M
exec "$GM" run --pipeline "$T/pipeline.json" --workers 2 --epochs 1 --samples-per-split 20 \
  --db "$DB" --name slurm -- $PY "$SRC/tests/e2e/trainer.py" "$T/slurm.json" 1
SCRIPT
id=$(GM_TEST_KILL_COORDINATOR_AFTER=5 sbatch --parsable --chdir="$T" --output="$T/slurm.out" \
  --export=ALL "$T/slurm.sbatch") || fail "sbatch refused the job"
id=${id%%;*}
slurm_job_completes "$id" "$T/slurm.out" || fail "job $id did not complete"
exactly_once "$T/slurm.json" 1200 || { cat "$T/slurm.out" >&2; fail "samples lost or repeated"; }
ok "Slurm GPU job: its coordinator killed mid-epoch, every sample exactly once"
[[ $(sqlite3 "$DB" "SELECT backend || ' ' || status FROM runs WHERE id = 'slurm'") == "slurm succeeded" ]] ||
  fail "runs.db: $(sqlite3 "$DB" "SELECT backend, status FROM runs WHERE id = 'slurm'")"
ok "runs.db: the Slurm run succeeded"
expect_in "$T/slurm.out" "from its journal" "the job's output says the coordinator was started again"
quiet_output "$T/slurm.out" "the Slurm job whose coordinator was killed" \
  "the coordinator \(pid [0-9]+\) was killed by signal 9"
done_suite
