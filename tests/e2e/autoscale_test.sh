#!/usr/bin/env bash
# End-to-end: `goldminer run --autoscale on` adds workers while the trainer waits
# for data and each addition pays off, drains them when the trainer is the
# bottleneck, records every decision with its reason, and loses no sample. The
# pipeline's cost is a sleep in a Python dataset (10 ms per sample, one child
# process per worker), so a worker's rate does not depend on this machine's speed.
source "$(dirname "$0")/lib.sh"
command -v sqlite3 >/dev/null || fail "sqlite3 is missing: run scripts/install-deps.sh"
slow_pipeline "$T/pipeline.json"
DB=$T/runs.db
export GM_TEST_GOLDMINER=$GM

# 1. Input-bound: a trainer that takes batches as fast as they come.
expect_rc 0 "an autoscaled run, input-bound" -- "$GM" run --pipeline "$T/pipeline.json" \
  --workers 1 --autoscale on --min-workers 1 --max-workers 3 --scale-period 1 \
  --sample-interval 0.25 --samples-per-split 40 --db "$DB" --name up -- \
  $PY "$SRC/tests/e2e/trainer.py" "$T/up.json" 6
expect_in "$T/err" "autoscaler: data wait" "the decisions are logged with their reason"
[[ $(sqlite3 "$DB" "SELECT count(*) FROM events WHERE run_id = 'up' AND kind = 'scale' AND message LIKE '1 -> _ workers: data wait %above 10%'") -ge 1 ]] ||
  fail "no addition recorded: $(sqlite3 "$DB" "SELECT message FROM events WHERE run_id = 'up'")"
ok "runs.db: a scale event from 1 worker up, with its reason"
[[ $(sqlite3 "$DB" "SELECT max(value) FROM metrics WHERE run_id = 'up' AND name = 'workers'") =~ ^[23](\.0)?$ ]] ||
  fail "workers: $(sqlite3 "$DB" "SELECT t_s, value FROM metrics WHERE run_id = 'up' AND name = 'workers'")"
ok "the time series shows the added worker(s), never more than --max-workers"
$PY - "$T/up.json" <<'PY' || fail "samples lost or repeated while scaling"
import json, sys
j = json.load(open(sys.argv[1]))
assert len(j["epochs"]) == 6, len(j["epochs"])
for keys in j["epochs"]:
    assert len(keys) == 400 and len(set(keys)) == 400, (len(keys), len(set(keys)))
PY
ok "every sample of the 6 epochs arrived exactly once"

# 2. Trainer-bound: 0.5 s per batch of 10 (20 samples/s), one worker makes 100: a
#    smoke case of the real drain (SIGTERM, the worker's splits handed back, the
#    record). The autoscaler's rules (that nothing is added here, the settle and
#    hold periods, undoing a costly removal) are unit-tested on a fake clock
#    (tests/unit/run_loop_test.cc); nothing here depends on this machine's speed
#    beyond a 5x margin.
GM_TEST_STEP_S=0.5 expect_rc 0 "an autoscaled run, trainer-bound" -- "$GM" run \
  --pipeline "$T/pipeline.json" --workers 2 --autoscale on --min-workers 1 --max-workers 3 \
  --scale-period 5 --sample-interval 0.25 --samples-per-split 40 --db "$DB" --name down -- \
  $PY "$SRC/tests/e2e/trainer.py" "$T/down.json" 2
[[ $(sqlite3 "$DB" "SELECT count(*) FROM events WHERE run_id = 'down' AND kind = 'scale' AND message LIKE '2 -> 1 workers: data wait %below 2%%'") -ge 1 ]] ||
  fail "no removal: $(sqlite3 "$DB" "SELECT message FROM events WHERE run_id = 'down'")"
[[ $(sqlite3 "$DB" "SELECT count(*) FROM workers WHERE run_id = 'down' AND exit LIKE 'drained: %'") -ge 1 ]] ||
  fail "no worker recorded as drained: $(sqlite3 "$DB" "SELECT * FROM workers WHERE run_id = 'down'")"
ok "a worker that cost nothing was drained (2 -> 1) and recorded so"
$PY - "$T/down.json" <<'PY' || fail "samples lost or repeated while draining"
import json, sys
epochs = json.load(open(sys.argv[1]))["epochs"]
assert len(epochs) == 2, len(epochs)
for keys in epochs:
    assert len(keys) == 400 and len(set(keys)) == 400, (len(keys), len(set(keys)))
PY
ok "every sample arrived exactly once"
done_suite
