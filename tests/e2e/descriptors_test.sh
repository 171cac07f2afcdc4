#!/usr/bin/env bash
# End-to-end: data workers that run out of file descriptors mid-run (their soft
# RLIMIT_NOFILE lowered to their lowest free descriptor for 3 s, with prlimit) do
# not count the photos they cannot open as bad input, even with on_error "skip":
# they make the split again once descriptors are back, and the trainer gets every
# sample of both epochs exactly once, none skipped.
source "$(dirname "$0")/lib.sh"

photo_corpus "$T/corpus"
small_pipeline "$T/pipeline.json"
$PY - "$T/pipeline.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
p["on_error"] = "skip"
json.dump(p, open(sys.argv[1], "w"))
PY
GM_TEST_NOFILE_AFTER=2 GM_TEST_STEP_S=0.1 timeout 300 "$GM" run --backend local \
  --pipeline "$T/pipeline.json" --workers 2 --epochs 2 --samples-per-split 8 --no-db -- \
  $PY "$SRC/tests/e2e/trainer.py" "$T/r.json" 2 >"$T/out" 2>"$T/err" ||
  { cat "$T/err" >&2; fail "the run whose workers ran out of descriptors"; }
exactly_once "$T/r.json" 36 || { cat "$T/err" >&2; fail "the trainer's samples"; }
ok "every sample of both epochs exactly once"
if grep -q "warning: skipped " "$T/err"; then grep "warning: skipped " "$T/err" >&2; fail "a sample was counted as skipped for want of a descriptor"; fi
ok "no sample counted as skipped"
expect_in "$T/err" "Too many open files" "the workers met the shortage"
expect_in "$T/err" "making it again in 1 s" "the workers made the split again instead of skipping"
done_suite
