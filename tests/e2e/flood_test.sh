#!/usr/bin/env bash
# End-to-end: a data worker holding the worker key (tests/e2e/flood_worker.py)
# takes a split, never makes it, and (but in mode "hold") floods the trainer's client with 1 MiB
# batches instead (up to 800 MiB in 6 s): of the next epoch, of its own split
# numbered past anything the trainer waits for, or with one sample repeated. The client refuses batches no
# honest worker sends (dropping that connection) and stops granting credit at the
# look-ahead bound (GOLDMINER_CLIENT_BUFFER_MB, 32 MiB here), so its memory stays
# within the bound plus the credit granted; when the flood ends, the split goes to
# a real worker and the trainer still gets every sample exactly once.
source "$(dirname "$0")/lib.sh"

# Real workers that take a few seconds per epoch (0.5 ms a sample in a Python
# dataset): the flood worker registers while most splits are still to be made,
# so the split it holds comes early, and meanwhile the real workers run out of
# credit too (they make later splits), so the progress rule keeps granting all.
sleepy_pipeline "$T/pipeline.json" 8000 0.0005
# Mode "other" (batches of splits the worker was never given) also checks the
# progress rule's second half: the flood worker's split goes to a real worker
# whose credit is used while the other real worker, done with the epoch, holds
# credit it cannot spend; the client grants the awaited split's holder one more.
for mode in ahead next-epoch other repeat; do
  GOLDMINER_CLIENT_BUFFER_MB=32 run_trainer "$mode" "$mode: beside the flood" -- --backend local \
    --pipeline "$T/pipeline.json" --workers 2 --epochs 2 --samples-per-split 20 --liveness-timeout 5 --no-db -- \
    $PY "$SRC/tests/e2e/flood_trainer.py" "$T/$mode.json" 2 "$mode" 6 1 800
  $PY - "$T/$mode.json" "$mode" <<'PY' || { cat "$T/$mode.err" >&2; fail "$mode: the trainer's batches or memory"; }
import json, sys
r, mode = json.load(open(sys.argv[1])), sys.argv[2]
assert "error" not in r, r
for e, keys in enumerate(r["epochs"]):
    assert len(keys) == len(set(keys)) == 8000, f"epoch {e}: {len(keys)} keys, {len(set(keys))} distinct"
    assert not any(k.startswith("forged") or k == "same" for k in keys), f"epoch {e}: a forged sample was delivered"
f = r["flood"]
assert f and f["batches_sent"] > 0, f"the flood worker sent nothing: {f}"
grown = (r["max_rss_kib"] - r["rss_before_kib"]) // 1024
print(f"# {mode}: the flood worker sent {f['batches_sent']} batches ({f['mib_sent']} MiB) on "
      f"{f['connections']} connection(s); the trainer grew by {grown} MiB")
# The flood worker's part of the 32 MiB (a third: three workers), plus the credit
# each connection may hold (5 batches of 1 MiB), plus noise.
assert grown < 32 // 3 + 3 * 5 + 16, f"the trainer grew by {grown} MiB"
PY
  ok "$mode: every sample of 2 epochs exactly once, none forged, and the trainer's memory stayed within the look-ahead bound"
done
# next-epoch: its batches wait unchecked in its part of the bound; the next
# epoch's view of the holders drops them (the flood worker has left by then, so
# nothing is said of it).
expect_in "$T/repeat.err" "repeats sample \"same\"" "repeat: the client says why it dropped the worker"
expect_in "$T/ahead.err" "a worker sends a split's batches in order" "ahead: the client says why it dropped the worker"
expect_in "$T/other.err" "sent batches of splits the coordinator never gave it" "other: the client says why it dropped the worker"

# A worker that cuts its split to batch 0 and says so in SPLIT_DONE, with no
# sample skipped. Under on_error "fail" nothing may be skipped, so the plan gives
# every split's count even at world size 1: the client refuses the cut batch,
# the coordinator drops the worker, and a real worker makes the split.
sed 's/"seed": 1 }/"seed": 1, "on_error": "fail" }/' "$T/pipeline.json" >"$T/fail.json"
grep -q '"on_error": "fail"' "$T/fail.json" || fail "the fail pipeline: $(cat "$T/fail.json")"
GOLDMINER_CLIENT_BUFFER_MB=32 run_trainer cut "cut (on_error fail): beside the cut" -- --backend local \
  --pipeline "$T/fail.json" --workers 2 --epochs 2 --samples-per-split 20 --liveness-timeout 5 --no-db -- \
  $PY "$SRC/tests/e2e/flood_trainer.py" "$T/cut.json" 2 cut 6 1 800
{ exactly_once "$T/cut.json" 8000 &&
  $PY -c 'import json, sys; assert json.load(open(sys.argv[1]))["flood"]["batches_sent"] > 0' "$T/cut.json"; } ||
  { cat "$T/cut.err" >&2; fail "cut (on_error fail): the trainer's batches"; }
ok "cut (on_error fail): every sample of 2 epochs exactly once, none from the worker that cut its split"
expect_in "$T/cut.err" "was known to have 2 batches, now told 1" "cut (on_error fail): the client says why it dropped the worker"
# The coordinator learns of the cut first from whichever comes first: the
# worker's SPLIT_DONE (its own finding) or the rank's report of the cut BATCH
# (then the worker's connection is closed before its SPLIT_DONE is read). Either
# way it names the cut split and drops the worker.
grep -qE "coordinator: .*(has 1 batches with 0 samples skipped, but the rest make 2 batches of 10|rank 0 reports worker [0-9]+ .*epoch 0 split [0-9]+ was known to have 2 batches, now told 1; it is dropped)" \
  "$T/cut.err" || { cat "$T/cut.err" >&2; fail "cut (on_error fail): the coordinator says why it dropped the worker"; }
ok "cut (on_error fail): the coordinator says why it dropped the worker"
expect_in "$T/cut.err" "run: every epoch delivered" "cut (on_error fail): every epoch was delivered"

# Under on_error "skip" a split's count is open at world size 1 (a skipped sample
# changes it), so the trainer may read the cut split short: the coordinator,
# which knows the split's size, stops the run and says what was lost.
timeout 120 "$GM" run --backend local --pipeline "$T/pipeline.json" --workers 2 \
  --epochs 2 --samples-per-split 20 --liveness-timeout 5 --no-db -- \
  $PY "$SRC/tests/e2e/flood_trainer.py" "$T/cut-skip.json" 2 cut 6 1 800 >"$T/cut-skip.out" 2>"$T/cut-skip.err"
rc=$?
[[ $rc == 3 ]] || { cat "$T/cut-skip.err" >&2; fail "cut (on_error skip): exit $rc, expected the trainer's 3"; }
ok "cut (on_error skip): the run fails"
expect_in "$T/cut-skip.json" "the run failed: worker" "cut (on_error skip): the trainer is told the run failed"
expect_in "$T/cut-skip.err" "the trainer may have read the split short, so the run stops" \
  "cut (on_error skip): the coordinator says what was lost"
grep -q "every epoch delivered" "$T/cut-skip.err" && fail "cut (on_error skip): 'every epoch delivered' was printed"
ok "cut (on_error skip): 'every epoch delivered' is not printed"

# A worker whose every count is right but whose split's last batch holds 1
# sample of 10 (9 lost, under on_error "skip", where a last batch may be short):
# the coordinator sums what the trainer acknowledged against the split's size
# and the run fails saying what was lost, whether or not the trainer got that
# far before it ended.
timeout 120 "$GM" run --backend local --pipeline "$T/pipeline.json" --workers 2 \
  --epochs 2 --samples-per-split 20 --liveness-timeout 5 --no-db -- \
  $PY "$SRC/tests/e2e/flood_trainer.py" "$T/short.json" 2 short 6 1 800 >"$T/short.out" 2>"$T/short.err"
rc=$?
[[ $rc == 1 || $rc == 3 ]] || { cat "$T/short.err" >&2; fail "short: exit $rc, expected a failure"; }
ok "short: the run fails (exit $rc)"
expect_in "$T/short.err" "reached the trainer with 11 samples and 0 said skipped, where 20 were due" \
  "short: the coordinator says what was lost"
grep -q "every epoch delivered" "$T/short.err" && fail "short: 'every epoch delivered' was printed"
ok "short: 'every epoch delivered' is not printed"

# A worker that takes a split and heartbeats but never sends a batch of it (it
# would hold the split for 60 s): the trainer's client reports it once it has
# held the awaited batch for the stall timeout (2 s here), the coordinator drops
# it, and a real worker makes the split.
run_trainer hold "hold: beside the worker that holds a split" -- --backend local \
  --pipeline "$T/pipeline.json" --workers 2 --epochs 2 --samples-per-split 20 --liveness-timeout 5 \
  --stall-timeout 2 --no-db -- $PY "$SRC/tests/e2e/flood_trainer.py" "$T/hold.json" 2 hold 60 1 800
exactly_once "$T/hold.json" 8000 || { cat "$T/hold.err" >&2; fail "hold: the trainer's batches"; }
$PY - "$T/hold.json" <<'PY' || { cat "$T/hold.err" >&2; fail "hold: the worker was not dropped in time"; }
import json, sys
f = json.load(open(sys.argv[1]))["flood"]
print(f"# hold: the coordinator dropped the worker {f['dropped_after_s']:.1f} s after it took its split")
assert f["batches_sent"] == 0 and f["dropped_after_s"] is not None and f["dropped_after_s"] < 60, f
PY
ok "hold: every sample of 2 epochs exactly once; the worker holding a split was dropped before it let go"
expect_in "$T/hold.err" "s without sending it (the stall timeout" "hold: the client says why it reported the worker"
expect_in "$T/hold.err" "it is dropped and its splits go to others" "hold: the coordinator says it dropped the worker"
expect_in "$T/hold.err" "workers dropped at a trainer's word" "hold: the run's last line counts it"

done_suite
