#!/usr/bin/env bash
# End-to-end: the same-host path (dataplane/shm.h). Workers on the trainer's host
# send batch data in shared-memory segments; a worker that offers no same-host
# path ("another host": GOLDMINER_SAME_HOST=off) is read over TCP in the same run.
# Every sample of every epoch arrives exactly once, with the pixels of a TCP-only
# run, also when a worker is killed with SIGKILL while its segments are in flight
# and in use. A trainer killed with SIGKILL holding its batches leaves nothing in
# /dev/shm and no process holding a segment.
source "$(dirname "$0")/lib.sh"

photo_corpus "$T/corpus"
small_pipeline "$T/pipeline.json"
export GM_TEST_GOLDMINER=$GM
shm_before=$(ls -A /dev/shm | sort)

run() {  # run NAME WORKERS [env...]
  local name=$1 workers=$2; shift 2
  # -v: each worker's last line counts its batches (in shared memory, in place)
  gm_run "$name" "$@" -- -v --backend local --pipeline "$T/pipeline.json" --workers "$workers" \
    --epochs 2 --samples-per-split 8 --no-db -- $PY "$SRC/tests/e2e/trainer.py" "$T/$name.json" 2
}
check() {  # check NAME REF WHAT: NAME delivered exactly REF's samples and pixels; prints stats
  $PY - "$T/$1.json" "$T/$2.json" "$3" <<'PY'
import json, sys
got, ref, what = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3]
assert "error" not in got, got
for e, (g, r) in enumerate(zip(got["epochs"], ref["epochs"])):
    assert len(g) == len(set(g)) == 36, f"{what}: epoch {e}: {len(g)} keys, {len(set(g))} distinct"
    assert g == r, f"{what}: epoch {e}: order differs from the TCP-only run"
assert got["digests"] == ref["digests"], f"{what}: pixels or labels differ from the TCP-only run"
s = got["stats"]
print(s["batches"], s["same_host_batches"])
PY
}

run tcp 2 GOLDMINER_SAME_HOST=off || { cat "$T/tcp.err" >&2; fail "the TCP-only run"; }
read -r total shm < <(check tcp tcp "TCP only") || fail "the TCP-only run's batches"
[[ $shm == 0 ]] || fail "GOLDMINER_SAME_HOST=off still received $shm batches in shared memory"
ok "TCP only (GOLDMINER_SAME_HOST=off): 72 samples, $total batches, none in shared memory"

run shm 2 || { cat "$T/shm.err" >&2; fail "the same-host run"; }
read -r total shm < <(check shm tcp "same host") || fail "the same-host run's batches"
[[ $shm == "$total" ]] || fail "same host: only $shm of $total batches came in shared memory"
ok "same host: all $total batches in shared memory, exactly the TCP run's samples, order and pixels"
# Once their client is connected, the workers' samples are written by their last
# stage straight into the batch's segment (no copy in the worker): their exit
# lines count those batches.
in_place=$(sed -n 's/.*in shared memory (\([0-9]*\) written in place).*/\1/p' "$T/shm.err" |
  awk '{n += $1} END {print n + 0}')
(( in_place > 0 )) || { cat "$T/shm.err" >&2; fail "same host: no batch was written in its segment"; }
ok "same host: $in_place of $total batches written in place: each sample by its last stage, into the segment the trainer maps"

# One worker here, one that looks remote (it offers no same-host path): both in one run.
run mixed 1 GM_TEST_ADD_AFTER=2 GM_TEST_ADD_REMOTE=1 GM_TEST_STEP_S=0.05 \
  || { cat "$T/mixed.err" >&2; fail "the run with a same-host and a TCP worker"; }
read -r total shm < <(check mixed tcp "mixed") || fail "the mixed run's batches"
(( shm > 0 && shm < total )) || fail "mixed: $shm of $total batches in shared memory (want some, not all)"
ok "a same-host worker and a TCP worker in one run: $shm of $total batches in shared memory, the rest over TCP, exactly once"

# kill -9 of a worker with segments in flight (the trainer holds none back: each
# batch's segment is released as the next is taken) and in use.
run killed 2 GM_TEST_KILL_AFTER=3 GM_TEST_STEP_S=0.05 || { cat "$T/killed.err" >&2; fail "the run with a worker killed"; }
read -r total shm < <(check killed tcp "worker killed") || fail "the killed-worker run's batches"
(( shm > 0 )) || fail "worker killed: no batch in shared memory"
ok "a worker killed with SIGKILL mid-epoch: every sample once, same pixels ($total delivered; $shm received in shared memory, re-made ones dropped as copies)"

# kill -9 of the trainer holding every batch it got: the run fails, and nothing is left.
run died 2 GM_TEST_DIE_AFTER=4 GM_TEST_STEP_S=0.05
rc=$?
[[ $rc != 0 ]] || fail "a run whose trainer was killed succeeded"
ok "a trainer killed with SIGKILL holding its batches: the run ends with exit $rc"
holders=""
for maps in $(grep -l "goldminer-batch" /proc/[0-9]*/maps 2>/dev/null); do
  pid=${maps#/proc/}; pid=${pid%/maps}
  ours "$pid" && holders+="$pid "
done
[[ -z $holders ]] || fail "segments still mapped after the runs ended, by: $holders"
ok "no process maps a goldminer segment after the runs"
# (Other suites' processes may use /dev/shm meanwhile, torch's for one, and other
# suites' virtual worker hosts their blob caches, which are theirs while a host
# holds the folder's lock: only what nobody holds counts.)
left=""
for e in $(comm -13 <(echo "$shm_before") <(ls -A /dev/shm | sort) | grep -i "goldminer\|gm-"); do
  [[ $e == goldminer-vhost-* ]] && ! flock -n "/dev/shm/$e/.lock" true 2>/dev/null && continue
  left+="$e "
done
[[ -z $left ]] || fail "left in /dev/shm: $left"
ok "nothing of goldminer's in /dev/shm after the runs"
done_suite
