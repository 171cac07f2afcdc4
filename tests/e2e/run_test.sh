#!/usr/bin/env bash
# End-to-end: `goldminer run --backend local` with real worker processes and a
# Python trainer (goldminer.Loader). Every sample of every epoch reaches the
# trainer exactly once and in the same order as `goldminer worker --local` makes
# them, whatever happens to the workers: kill -9, drain, scale up, resume.
source "$(dirname "$0")/lib.sh"

photo_corpus "$T/corpus"
cat >"$T/pipeline.json" <<'JSON'
{ "version": 1,
  "source": {"type": "files", "root": "corpus", "pattern": "**/*.jpg", "label": "parent_dir"},
  "stages": [ {"op": "decode_jpeg"}, {"op": "random_resized_crop", "size": [32, 32]},
              {"op": "flip", "p": 0.5}, {"op": "to_tensor", "layout": "CHW", "dtype": "uint8"} ],
  "batch": {"size": 4}, "shuffle": {"buffer": 8}, "seed": 3, "on_error": "fail" }
JSON
SPLIT=8  # 36 files in splits of 8: 5 splits, 9 batches per epoch

# The reference: the same pipeline on this machine, in-process.
expect_rc 0 "reference run with worker --local" -- "$GM" worker --local --pipeline "$T/pipeline.json" \
  --epochs 2 --samples-per-split $SPLIT --out "$T/ref" --no-progress

export GM_TEST_GOLDMINER=$GM
run() {  # run NAME WORKERS WORLD [env...]: runs the trainer under `goldminer run`
  local name=$1 workers=$2 world=$3 v=; shift 3
  [[ " $* " == *" GM_TEST_VERBOSE=1 "* ]] && v=-v  # run -v: today's detail
  env "$@" "$GM" run $v --backend local --pipeline "$T/pipeline.json" --workers "$workers" \
    ${GM_TEST_BIND:+--bind "$GM_TEST_BIND"} \
    --world-size "$world" --epochs 2 --samples-per-split $SPLIT --liveness-timeout 5 \
    -- $PY "$SRC/tests/e2e/trainer.py" "$T/$name.{rank}.json" 2 >"$T/out" 2>"$T/err"
}

check() {  # check NAME WORLD: every rank's keys against the reference
  $PY - "$T" "$1" "$2" <<'PY'
import collections, json, sys
t, name, world = sys.argv[1], sys.argv[2], int(sys.argv[3])
ref = collections.defaultdict(list)
split_of = {}
for line in open(f"{t}/ref/keys.tsv"):
    e, _, k, s = line.rstrip("\n").split("\t")
    ref[int(e)].append(k)
    split_of[(int(e), k)] = int(s)
runs = [json.load(open(f"{t}/{name}.{r}.json")) for r in range(world)]
# What each rank must get: the epoch's splits in plan order (the order of the
# reference run), the split at plan position p going to rank p % world, each rank
# cut to the smallest rank's number of batches (equal shares). The reference
# names each sample's split (the shuffle makes a split a random subset of 8
# samples); a batch holds 4.
def expected(e):
    splits, order = {}, []
    for k in ref[e]:
        s = split_of[(e, k)]
        if s not in splits:
            splits[s] = []
            order.append(s)
        splits[s].append(k)
    batches = [[] for _ in range(world)]
    for p, s in enumerate(order):
        keys = splits[s]
        batches[p % world] += [keys[i:i + 4] for i in range(0, len(keys), 4)]
    share = min(len(b) for b in batches)
    return [[k for b in bs[:share] for k in b] for bs in batches]
for e in range(2):
    got = [r["epochs"][e] for r in runs]
    want = expected(e)
    for r in range(world):
        assert got[r] == want[r], f"epoch {e} rank {r}: got {len(got[r])} keys, want {len(want[r])}"
    keys = [k for g in got for k in g]
    assert len(keys) == len(set(keys)), f"epoch {e}: a sample reached two ranks or twice"
for r in runs:
    s = r["stats"]
    assert s["batches"] > 0 and s["data_wait_s"] >= 0, s
    assert r["shapes"] == [[3, 32, 32]], r["shapes"]
PY
}

run plain 2 1 || { cat "$T/err" >&2; fail "run with 2 workers"; }
ok "run with 2 workers and a Python trainer exits 0"
check plain 1 || fail "plain run delivers the reference order exactly once"
ok "2 epochs delivered exactly once, in the order of worker --local"

# Listening on every interface: workers and the trainer connect by a name or
# address other nodes can reach: this machine's name when it resolves beyond
# loopback, else its interface address (core/host.h, ReachableHostName).
GM_TEST_BIND=0.0.0.0 run bind 2 1 GM_TEST_VERBOSE=1 || { cat "$T/err" >&2; fail "run --bind 0.0.0.0"; }
check bind 1 || fail "run --bind 0.0.0.0 delivers the reference order exactly once"
advertised=$(grep -o 'data at [^ ]*' "$T/err" | head -n 1)
advertised=${advertised#data at }
advertised=${advertised%:*}
reachable=$($PY - "$(hostname)" <<'PY'
import socket, sys
name = sys.argv[1]
try:
    addrs = {a[4][0] for a in socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)}
except OSError:
    addrs = set()
print("name" if any(not (a.startswith("127.") or a == "::1") for a in addrs) else "address")
PY
)
if [[ $reachable == name ]]; then
  [[ $advertised == "$(hostname)" ]] || fail "workers advertise '$advertised', not $(hostname)"
else
  # Its interface address; the name only when it has none but loopback.
  [[ ($advertised =~ ^[0-9.]+$ && $advertised != 127.*) ||
     ($advertised == "$(hostname)" && -z $(hostname -I 2>/dev/null | tr -d ' ')) ]] ||
    fail "$(hostname) resolves to loopback only; workers advertise '$advertised'"
fi
ok "with --bind 0.0.0.0, workers advertise a reachable $reachable ($advertised)"
ok "--bind 0.0.0.0: 2 epochs delivered exactly once"
# With a pipeline, no worker starts a Python host before a DataLoader asks for one
# (its torch import would take the pipeline's CPU); without one, each does at once.
if grep -q "virtual DataLoader workers' Python host" "$T/err"; then
  cat "$T/err" >&2
  fail "a run with a pipeline started a Python host that no DataLoader asked for"
fi
cat >"$T/await_hosts.py" <<'PY'
import glob, sys, time
# Ends once 2 virtual-worker hosts run (exit 0), or after 120 s (exit 1).
deadline = time.monotonic() + 120
while time.monotonic() < deadline:
    hosts = 0
    for path in glob.glob("/proc/[0-9]*/cmdline"):
        try:
            hosts += b"goldminer._vhost" in open(path, "rb").read()
        except OSError:
            pass
    if hosts >= 2:
        sys.exit(0)
    time.sleep(0.1)
sys.exit(1)
PY
expect_rc 0 "each worker of a run without a pipeline starts its Python host as the run starts" \
  -- "$GM" run -v --backend local --workers 2 -- $PY "$T/await_hosts.py"
grep -q "virtual DataLoader workers' Python host ($PY) is pid" "$T/err" ||
  fail "the worker says which Python host it started (run -v)"

run kill 2 1 GM_TEST_VERBOSE=1 GM_TEST_KILL_AFTER=3 || { cat "$T/err" >&2; fail "run with a worker killed"; }
check kill 1 || fail "kill -9 of a worker mid-epoch"
expect_in "$T/err" "killed by signal 9" "the run saw the worker killed"
expect_in "$T/err" "starting another" "the run replaced it"
# stderr is no terminal here: the status line is logged (with -v the first at once,
# then every 30 s; without, from the 30th second).
grep -qE "goldminer: run run-[0-9-]+: [0-9]+ samples/s, data wait [0-9]+%, [0-9]+ worker\(s\) \([0-9.]+ CPUs\), epoch [0-9]+$" "$T/err" ||
  { cat "$T/err" >&2; fail "the run's status line was not logged"; }
ok "off a terminal, the run's status line is logged"
ok "kill -9 of a worker mid-epoch: still exactly once, same order"

run drain 2 1 GM_TEST_VERBOSE=1 GM_TEST_TERM_AFTER=3 || { cat "$T/err" >&2; fail "run with a worker drained"; }
check drain 1 || fail "drain of a worker mid-epoch"
ok "a worker drained (SIGTERM) mid-epoch: still exactly once, same order"
expect_in "$T/err" "drained: every batch it made was acknowledged" "the drained worker left cleanly"
# With each epoch read whole before the next is handed out, the drained worker
# finished its split and left once the trainer had acknowledged it: nothing it
# made was made again. (With epochs in flight, a split it held of the next epoch
# goes back at the drain and is made again: the worker need not wait an epoch.)
run drain 2 1 GM_TEST_VERBOSE=1 GM_TEST_TERM_AFTER=3 GOLDMINER_EPOCHS_IN_FLIGHT=off ||
  { cat "$T/err" >&2; fail "run with a worker drained, epochs one at a time"; }
check drain 1 || fail "drain of a worker mid-epoch, epochs one at a time"
expect_in "$T/err" " 0 splits reassigned" "epochs one at a time: no split of the drained worker was made again"

run scaleup 1 1 GM_TEST_ADD_AFTER=2 || { cat "$T/err" >&2; fail "run with a worker added"; }
check scaleup 1 || fail "scale up mid-epoch"
expect_in "$T/err" "2 worker registrations" "the added worker joined the run"
ok "a worker added mid-epoch: still exactly once, same order"

run resume 2 1 GM_TEST_RESUME_AFTER=4 || { cat "$T/err" >&2; fail "run with a resumed loader"; }
check resume 1 || fail "resume from a mid-epoch state"
ok "resume from a mid-epoch state_dict: nothing repeated or skipped"

run ranks 2 2 || { cat "$T/err" >&2; fail "run with 2 ranks"; }
check ranks 2 || fail "2 ranks get disjoint, equal shares"
ok "2 trainer ranks: disjoint, equal shares"

run ranks4 2 4 || { cat "$T/err" >&2; fail "run with 4 ranks"; }
check ranks4 4 || fail "4 ranks get disjoint, equal shares"
ok "4 trainer ranks: disjoint, equal shares"

# The coordinator vanishes (`goldminer run` killed): the trainer gets a clear error
# instead of hanging, and the workers exit within the liveness timeout.
# The trainer outlives `run` (killed): it reports through a FIFO read with a deadline.
mkfifo "$T/vanish.0.json"
run vanish 2 1 GM_TEST_KILL_RUN_AFTER=2 2>/dev/null
timeout 60 cat "$T/vanish.0.json" >"$T/vanish.result" ||
  { cat "$T/err" >&2; fail "the trainer reported after the coordinator vanished"; }
$PY - "$T/vanish.result" <<'PY' || fail "a vanished coordinator: clear error, workers gone"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["error"] and "coordinator" in j["error"], j
assert j["workers_alive"] == [], j
PY
ok "coordinator gone: the loader raises a clear error and the workers exit"
echo "    ($(cat "$T/vanish.result"))"

# A few steps of a real PyTorch training loop (CPU) fed by the workers.
expect_rc 0 "a PyTorch training loop under goldminer run" -- "$GM" run --pipeline "$T/pipeline.json" \
  --workers 2 --samples-per-split $SPLIT -- $PY "$SRC/examples/train/train.py" --steps 5 --classes 2
tail -n 1 "$T/out" | $PY -c '
import json, math, sys
j = json.load(sys.stdin)
assert j["steps"] == 5 and j["samples"] == 20, j
assert math.isfinite(j["first_loss"]) and math.isfinite(j["last_loss"]), j
assert j["input_shape"] == [4, 3, 32, 32], j
assert j["loader"]["batches"] >= 5, j' || fail "the training loop ran 5 steps with finite loss"
ok "5 training steps with finite loss on goldminer batches"

# The trainer's exit code is the run's.
expect_rc 7 "the run exits with the trainer's status" -- "$GM" run --pipeline "$T/pipeline.json" \
  --workers 1 -- $PY -c 'import sys; sys.exit(7)'

done_suite
