#!/usr/bin/env bash
# End-to-end: a local user of another uid, holding no key, squats every same-host
# name a data worker could get (tests/e2e/squatter.py: the whole ephemeral port
# range) and relays what reaches it to the worker's TCP port, zeroing every
# BATCH payload on the way. The workers cannot bind their names and say so; the
# trainer's client refuses the squatter (its uid is not ours) and reads every
# worker over TCP: every sample once, with the pixels of a clean run, and the
# squatter sees no byte from the client and rewrites no batch.
source "$(dirname "$0")/lib.sh"

photo_corpus "$T/corpus"
small_pipeline "$T/pipeline.json"

user=gm-squat-$$
useradd --system --no-create-home --shell /usr/sbin/nologin "$user" ||
  fail "cannot create the test user $user (useradd)"
squatter=""
cleanup() {
  [[ -n $squatter ]] && kill "$squatter" 2>/dev/null && wait "$squatter" 2>/dev/null
  userdel "$user" 2>/dev/null
  rm -rf "$T"
}
trap cleanup EXIT

run() {  # run NAME [env...]
  local name=$1; shift
  gm_run "$name" "$@" -- --backend local --pipeline "$T/pipeline.json" --workers 2 --epochs 2 \
    --samples-per-split 8 --no-db -- $PY "$SRC/tests/e2e/trainer.py" "$T/$name.json" 2
}

run clean GOLDMINER_SAME_HOST=off || { cat "$T/clean.err" >&2; fail "the clean TCP run"; }
ok "a clean TCP-only run for reference"

mkdir "$T/squat" && chown "$user" "$T/squat" && chmod 755 "$T"
# The script comes on stdin: the test user need not read the source tree.
setpriv --reuid="$user" --regid="$(id -g "$user")" --clear-groups -- \
  $PY - "$T/squat/stats.json" "$T/squat/ready" <"$SRC/tests/e2e/squatter.py" &
squatter=$!
for _ in $(seq 600); do [[ -e $T/squat/ready ]] && break; sleep 0.1; done
[[ -e $T/squat/ready ]] || fail "the squatter did not bind its names within 60 s"
ok "user $user (uid $(id -u "$user")) holds the same-host name of every ephemeral port"

run squatted || { cat "$T/squatted.err" >&2; fail "the run beside the squatter"; }
kill "$squatter"; wait "$squatter"; squatter=""
$PY - "$T/squatted.json" "$T/clean.json" "$T/squat/stats.json" <<'PY' || fail "the run beside the squatter delivered wrong batches"
import json, sys
got, ref, squat = (json.load(open(p)) for p in sys.argv[1:])
assert "error" not in got, got
for e, (g, r) in enumerate(zip(got["epochs"], ref["epochs"])):
    assert len(g) == len(set(g)) == 36, f"epoch {e}: {len(g)} keys, {len(set(g))} distinct"
    assert g == r, f"epoch {e}: the order differs from the clean run"
assert got["digests"] == ref["digests"], "pixels or labels differ from the clean run"
assert got["labels"] == ref["labels"], "labels differ from the clean run"
assert got["stats"]["same_host_batches"] == 0, got["stats"]
assert squat["bound"] > 20000, squat
assert squat["accepted"] >= 2, f"the client never reached the squatter: {squat}"
assert squat["client_bytes"] == 0, f"the client sent the squatter {squat['client_bytes']} bytes"
assert squat["batches_rewritten"] == 0, squat
print(squat["accepted"])
PY
grep -q "Address already in use" "$T/squatted.err" || { cat "$T/squatted.err" >&2; fail "the workers did not say their same-host name was taken"; }
expect_in "$T/squatted.err" "another user took the worker's same-host name" "the client's warning"
ok "beside the squatter: every sample once, the clean run's pixels and labels; the client refused the squatter before sending a byte and read over TCP"
done_suite
