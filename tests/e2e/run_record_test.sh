#!/usr/bin/env bash
# End-to-end: what `goldminer run` records of itself in runs.db (a real SQLite file,
# read with sqlite3 while the run writes it): the run with its status and exit code,
# its workers (a killed one and its replacement), a time series whose delivered
# rate adds up to the samples the trainer got, events; a failing trainer, a command
# that does not exist, a name already taken, SIGTERM (cancelled) and SIGKILL (a
# record that says the run did not finish).
source "$(dirname "$0")/lib.sh"
command -v sqlite3 >/dev/null || fail "sqlite3 is missing: run scripts/install-deps.sh"

photo_corpus "$T/corpus"
small_pipeline "$T/pipeline.json"
DB=$T/runs.db
q() { sqlite3 "$DB" "$1"; }
export GM_TEST_GOLDMINER=$GM

# 1. A run that succeeds: 2 epochs of 36 samples.
expect_rc 0 "a run recorded in runs.db" -- "$GM" run --pipeline "$T/pipeline.json" --workers 2 \
  --epochs 2 --samples-per-split 8 --db "$DB" --name ok --sample-interval 0.2 -- \
  $PY "$SRC/tests/e2e/trainer.py" "$T/ok.json" 2
expect_in "$T/err" "run ok succeeded (recorded in $DB)" "run says where the record is"
[[ $(q "SELECT status || ' ' || exit_code || ' ' || (ended_utc IS NOT NULL) || ' ' || backend || ' ' || world_size FROM runs WHERE id = 'ok'") == "succeeded 0 1 local 1" ]] ||
  fail "run ok: $(q "SELECT * FROM runs WHERE id = 'ok'")"
ok "the run's row: succeeded, exit 0, ended, local backend, 1 rank"
[[ $(q "SELECT pid > 0 AND host <> '' AND heartbeat_utc IS NOT NULL AND command LIKE '%trainer.py%' FROM runs WHERE id = 'ok'") == 1 ]] ||
  fail "run ok: pid, host, heartbeat, command: $(q "SELECT * FROM runs WHERE id = 'ok'")"
ok "the run's row names its host, pid, command and heartbeat"
[[ $(q "SELECT count(*) || ' ' || sum(ended_utc IS NOT NULL) || ' ' || sum(pid > 0) FROM workers WHERE run_id = 'ok'") == "2 2 2" ]] ||
  fail "workers of ok: $(q "SELECT * FROM workers WHERE run_id = 'ok'")"
[[ $(q "SELECT count(*) FROM workers WHERE run_id = 'ok' AND host = '$(hostname)' AND step_id IS NULL") == 2 ]] ||
  fail "local workers' places: $(q "SELECT * FROM workers WHERE run_id = 'ok'")"
ok "local workers are recorded on this host, with no Slurm step"
ok "both workers recorded, with their pid and end"
# The delivered rate, integrated over the time series, is the 72 samples delivered.
$PY - "$DB" <<'PY' || fail "the time series does not add up"
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
rows = db.execute("SELECT t_s, value FROM metrics WHERE run_id = 'ok' AND name = 'samples_per_s' "
                  "ORDER BY t_s").fetchall()
assert rows, "no samples_per_s points"
total, prev = 0.0, 0.0
for t, v in rows:
    total += v * (t - prev)
    prev = t
assert abs(total - 72) < 0.5, (total, rows)
names = {n for (n,) in db.execute("SELECT DISTINCT name FROM metrics WHERE run_id = 'ok'")}
assert names == {"samples_per_s", "data_wait_fraction", "workers", "worker_cpus", "epoch"}, names
w = db.execute("SELECT max(value) FROM metrics WHERE run_id = 'ok' AND name = 'workers'").fetchone()[0]
assert w == 2, w
f = db.execute("SELECT min(value), max(value) FROM metrics WHERE name = 'data_wait_fraction'").fetchone()
assert 0 <= f[0] <= f[1] <= 1, f
PY
ok "the time series: the delivered rate adds up to the 72 samples, 2 workers, waits in [0, 1]"
[[ $(q "SELECT count(*) > 0 AND count(*) = sum(cpu_s_per_sample > 0) AND count(*) = sum(bytes_out_per_sample > 0) FROM stage_costs WHERE run_id = 'ok'") == 1 ]] ||
  fail "stage costs of ok: $(q "SELECT * FROM stage_costs WHERE run_id = 'ok'")"
ok "per-stage costs from the workers' reports: CPU and bytes per sample for every stage"
expect_in <(q "SELECT kind || ': ' || message FROM events WHERE run_id = 'ok' ORDER BY id") \
  "run: run started: 2 worker(s), 1 trainer rank(s)" "an event for the start"
expect_in <(q "SELECT kind || ': ' || message FROM events WHERE run_id = 'ok' ORDER BY id") \
  "run: run succeeded: the trainer exited with status 0" "an event for the end"

# 2. The same name again: refused before anything starts.
expect_rc 1 "a name already recorded is refused" -- "$GM" run --pipeline "$T/pipeline.json" \
  --db "$DB" --name ok -- $PY "$SRC/tests/e2e/trainer.py" "$T/again.json" 1
expect_in "$T/err" "a run with id \"ok\" is already recorded" "the message names the run"
[[ ! -e $T/again.json && $(q "SELECT count(*) FROM workers WHERE run_id = 'ok'") == 2 ]] ||
  fail "the refused run started something"
ok "nothing was started or recorded for it"

# 3. A trainer that fails: the run exits with its status and is recorded as failed.
expect_rc 3 "a failing trainer's exit status is the run's" -- "$GM" run --pipeline "$T/pipeline.json" \
  --db "$DB" --name bad -- $PY -c 'import sys; sys.exit(3)'
[[ $(q "SELECT status || ' ' || exit_code FROM runs WHERE id = 'bad'") == "failed 3" ]] ||
  fail "run bad: $(q "SELECT * FROM runs WHERE id = 'bad'")"
ok "recorded as failed with exit code 3"

# 4. A trainer command that does not exist: a clear message and a failed run.
expect_rc 1 "a trainer that does not exist" -- "$GM" run --pipeline "$T/pipeline.json" \
  --db "$DB" --name missing -- "$T/no-such-trainer"
expect_in "$T/err" "the trainer command '$T/no-such-trainer' is not an executable file" \
  "the message names the command, before any worker starts"
[[ $(q "SELECT count(*) FROM workers WHERE run_id = 'missing'") == 0 ]] ||
  fail "workers started for a trainer that does not exist"
[[ $(q "SELECT status || ' ' || exit_code FROM runs WHERE id = 'missing'") == "failed 1" ]] ||
  fail "run missing: $(q "SELECT * FROM runs WHERE id = 'missing'")"
expect_in <(q "SELECT message FROM events WHERE run_id = 'missing'") "run refused: the trainer command '$T/no-such-trainer'" \
  "the failure is an event of the run"

# 4b. --backend slurm outside a Slurm job: refused, and recorded as a failed run.
expect_rc 1 "--backend slurm outside a job" -- env -u SLURM_JOB_ID "$GM" run --backend slurm \
  --pipeline "$T/pipeline.json" --db "$DB" --name refused -- $PY "$SRC/tests/e2e/trainer.py" "$T/r.json" 1
expect_in "$T/err" "SLURM_JOB_ID is not set" "the message says why"
[[ $(q "SELECT status || ' ' || exit_code || ' ' || backend FROM runs WHERE id = 'refused'") == "failed 1 slurm" ]] ||
  fail "run refused: $(q "SELECT * FROM runs WHERE id = 'refused'")"
expect_in <(q "SELECT message FROM events WHERE run_id = 'refused'") "run refused: --backend slurm: SLURM_JOB_ID is not set" \
  "the refusal is recorded with its reason"

# 5. A worker killed with SIGKILL mid-epoch: its row says how it ended, a
#    replacement has its own row, and every sample still arrives once.
GM_TEST_KILL_AFTER=3 expect_rc 0 "a run with a worker killed" -- "$GM" run \
  --pipeline "$T/pipeline.json" --workers 2 --epochs 2 --samples-per-split 8 --db "$DB" \
  --name killed -- $PY "$SRC/tests/e2e/trainer.py" "$T/killed.json" 2
[[ $(q "SELECT count(*) FROM workers WHERE run_id = 'killed'") == 3 ]] ||
  fail "workers of killed: $(q "SELECT * FROM workers WHERE run_id = 'killed'")"
[[ $(q "SELECT count(*) FROM workers WHERE run_id = 'killed' AND exit LIKE '%signal 9%'") == 1 ]] ||
  fail "workers of killed: $(q "SELECT * FROM workers WHERE run_id = 'killed'")"
ok "the killed worker's row says signal 9; its replacement has a row of its own"
$PY - "$T/killed.json" <<'PY' || fail "samples lost or repeated after the kill"
import json, sys
j = json.load(open(sys.argv[1]))
for keys in j["epochs"]:
    assert len(keys) == 36 and len(set(keys)) == 36, len(keys)
PY
ok "every sample of both epochs arrived once"

# 6. Readable while it runs; SIGTERM records it as cancelled.
"$GM" run --pipeline "$T/pipeline.json" --workers 1 --epochs 0 --db "$DB" --name live \
  --sample-interval 0.2 -- $PY "$SRC/tests/e2e/sleep_trainer.py" --step-ms 50 --epochs 1000 \
  >"$T/live.out" 2>"$T/live.err" &
live=$!
first=
for _ in $(seq 1 100); do
  first=$(q "SELECT heartbeat_utc FROM runs WHERE id = 'live' AND status = 'running'" 2>/dev/null || true)
  [[ -n $first && $(q "SELECT count(*) FROM metrics WHERE run_id = 'live'" 2>/dev/null || echo 0) -gt 0 ]] && break
  sleep 0.1
done
[[ -n $first ]] || fail "run live was not readable while running: $(cat "$T/live.err")"
ok "while it runs: status running, points in the time series"
for _ in $(seq 1 40); do  # the heartbeat is in whole seconds
  [[ $(q "SELECT heartbeat_utc FROM runs WHERE id = 'live'") != "$first" ]] && break
  sleep 0.1
done
[[ $(q "SELECT heartbeat_utc FROM runs WHERE id = 'live'") != "$first" ]] || fail "the heartbeat did not move"
ok "the heartbeat moves while it runs"
kill -TERM $live
wait $live
[[ $(q "SELECT status || ' ' || (ended_utc IS NOT NULL) FROM runs WHERE id = 'live'") == "cancelled 1" ]] ||
  fail "run live: $(q "SELECT * FROM runs WHERE id = 'live'")"
[[ $(q "SELECT count(*) FROM workers WHERE run_id = 'live' AND ended_utc IS NULL") == 0 ]] ||
  fail "a worker of live has no end: $(q "SELECT * FROM workers WHERE run_id = 'live'")"
ok "SIGTERM: recorded as cancelled, every worker ended"

# 7. SIGKILL: nothing can write the end; the record still says running, with a
#    heartbeat that stops (a reader tells a killed run by its old heartbeat).
"$GM" run --pipeline "$T/pipeline.json" --workers 1 --epochs 0 --db "$DB" --name gone \
  --sample-interval 0.2 -- $PY "$SRC/tests/e2e/sleep_trainer.py" --step-ms 50 --epochs 1000 \
  >"$T/gone.out" 2>"$T/gone.err" &
gone=$!
for _ in $(seq 1 100); do
  [[ $(q "SELECT count(*) FROM metrics WHERE run_id = 'gone'" 2>/dev/null || echo 0) -gt 0 ]] && break
  sleep 0.1
done
children=$(pgrep -P $gone || true)  # its workers and trainer, left behind by SIGKILL
kill -KILL $gone
wait $gone 2>/dev/null
[[ -z $children ]] || kill -KILL $children 2>/dev/null || true
beat=$(q "SELECT heartbeat_utc FROM runs WHERE id = 'gone'")
sleep 1.5
[[ $(q "SELECT status || ' ' || (ended_utc IS NULL) || ' ' || heartbeat_utc FROM runs WHERE id = 'gone'") == "running 1 $beat" ]] ||
  fail "run gone: $(q "SELECT * FROM runs WHERE id = 'gone'")"
ok "SIGKILL: the record says running, no end, and its heartbeat has stopped"
[[ $(sqlite3 "$DB" "PRAGMA integrity_check") == ok ]] || fail "runs.db is damaged"
ok "runs.db is intact"
done_suite
