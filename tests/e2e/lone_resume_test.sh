#!/usr/bin/env bash
# End-to-end: in a run of two ranks, only rank 1 resumes a checkpoint taken
# inside epoch 1 (rank 0 starts afresh, as after a lost checkpoint). The run must
# not move to epoch 1 for everyone: rank 0 still reads epoch 0, and rank 1's
# RESUME is refused with the reason (every rank must resume from the same
# checkpoint), so the run fails saying so instead of skipping an epoch.
source "$(dirname "$0")/lib.sh"

photo_corpus "$T/corpus"
small_pipeline "$T/pipeline.json"
export GM_TEST_GOLDMINER=$GM
run() {  # run NAME [env...]: two ranks under `goldminer run`
  local name=$1; shift
  gm_run "$name" "$@" -- --backend local --pipeline "$T/pipeline.json" --workers 2 \
    --world-size 2 --epochs 2 --samples-per-split 8 --no-db \
    -- $PY "$SRC/tests/e2e/trainer.py" "$T/$name.{rank}.json" 2
}

# Each rank has 18 samples (5 batches of 4) per epoch: after 7 it is inside epoch 1.
run a GM_TEST_SAVE_AFTER=7 GM_TEST_STATE="$T/a.{rank}.json.state" ||
  { cat "$T/a.err" >&2; fail "the run that saves both ranks' states"; }
$PY -c "import json,sys; s=json.load(open(sys.argv[1]))['loader']; sys.exit(0 if s['epoch'] == 1 else 1)" \
  "$T/a.1.json.state" || fail "rank 1's state is not inside epoch 1: $(cat "$T/a.1.json.state")"
ok "rank 1 saved a state inside epoch 1"

cp "$T/a.1.json.state" "$T/b.1.json.state"  # rank 0 has none
run b GM_TEST_STATE="$T/b.{rank}.json.state"
rc=$?
[[ $rc != 0 && $rc != 124 ]] || { cat "$T/b.err" >&2; fail "a run where only rank 1 resumed epoch 1: exit $rc"; }
ok "the run fails (exit $rc)"
expect_in "$T/b.1.json" "every rank must resume from the same checkpoint" "rank 1's RESUME is refused with the reason"
# Which reason depends on how far rank 0 got first: it read epoch 0's plan, or
# its acknowledgements already arrived.
grep -qE "rank 0 reads epoch 0|delivering epoch 0 to other ranks" "$T/b.1.json" ||
  { cat "$T/b.1.json" >&2; fail "the refusal does not say that epoch 0 is being read"; }
ok "the refusal says that epoch 0 is being read"
if grep -q "already finished" "$T/b.0.json" "$T/b.err" 2>/dev/null; then
  cat "$T/b.0.json" >&2; fail "rank 0 was told epoch 0 was finished: the run skipped it"
fi
ok "rank 0 was not told epoch 0 was finished"
done_suite
