#!/usr/bin/env bash
# End-to-end: a trainer checkpoints its Loader's state in one `goldminer run` and
# continues it in a NEW run (as a requeued Slurm job does): another coordinator,
# another worker count. What the two runs deliver together is exactly what one
# uninterrupted run delivers: the same batches (pixels and labels), in the same
# order, nothing twice, nothing lost; with on_error skip (split sizes known only
# once made), from inside epoch 0 and from inside epoch 1, with one and two ranks.
# A state that does not belong to the run is refused with the reason.
source "$(dirname "$0")/lib.sh"

photo_corpus "$T/corpus"
# Three files that do not decode: with on_error skip their splits are shorter, so
# no batch count is known before a worker has made the split.
for i in 0 1 2; do head -c 700 "$SRC/tests/data/engine/photo$i.jpg" >"$T/corpus/a/bad-$i.jpg"; done
cat >"$T/pipeline.json" <<'JSON'
{ "version": 1,
  "source": {"type": "files", "root": "corpus", "pattern": "**/*.jpg", "label": "parent_dir"},
  "stages": [ {"op": "decode_jpeg"}, {"op": "random_resized_crop", "size": [24, 24]},
              {"op": "flip", "p": 0.5}, {"op": "to_tensor", "layout": "CHW", "dtype": "uint8"} ],
  "batch": {"size": 4}, "shuffle": {"buffer": 8}, "seed": 3, "on_error": "skip" }
JSON

export GM_TEST_GOLDMINER=$GM
run() {  # run NAME WORKERS WORLD PIPELINE [env...]: the trainer under `goldminer run`
  local name=$1 workers=$2 world=$3 pipeline=$4; shift 4
  gm_run "$name" "$@" -- --backend local --pipeline "$pipeline" --workers "$workers" \
    --world-size "$world" --epochs 2 --samples-per-split 8 --no-db \
    -- $PY "$SRC/tests/e2e/trainer.py" "$T/$name.{rank}.json" 2
}

# joined REF A B WORLD: for each rank, A's batches then B's equal REF's, per epoch.
joined() {
  $PY - "$T" "$@" <<'PY'
import json, sys
t, ref, a, b, world = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
for r in range(world):
    want = json.load(open(f"{t}/{ref}.{r}.json"))
    got = json.load(open(f"{t}/{b}.{r}.json"))  # B started from A's checkpoint
    cut = json.load(open(f"{t}/{a}.{r}.json.state"))
    for field in ("epochs", "labels", "batches"):
        w, g = want[field], got[field]
        if w != g:
            sys.exit(f"rank {r}: {field} differ: first run stopped at {cut['loader']}; "
                     f"uninterrupted {[len(x) for x in w]}, resumed {[len(x) for x in g]}")
    keys = [k for e in got["epochs"] for k in e]
    assert len(keys) == len(set((e, k) for e, ks in enumerate(got["epochs"]) for k in ks))
    assert sum(len(e) for e in want["batches"]) > 0
PY
}

# The reference: one uninterrupted run, one rank and two ranks.
run ref 2 1 "$T/pipeline.json" || { cat "$T/ref.err" >&2; fail "the uninterrupted run"; }
run ref2 2 2 "$T/pipeline.json" || { cat "$T/ref2.err" >&2; fail "the uninterrupted 2-rank run"; }
$PY - "$T/ref.0.json" <<'PY' || fail "the reference does not skip the broken files"
import json, sys
r = json.load(open(sys.argv[1]))
n = [len(e) for e in r["epochs"]]
assert n == [36, 36], n  # 39 files, 3 skipped
PY
ok "uninterrupted runs: 36 of 39 samples per epoch (3 skipped), 1 and 2 ranks"

# Inside epoch 0: the first run stops after 3 batches; the second, with 3 workers
# instead of 2, continues.
run a0 2 1 "$T/pipeline.json" GM_TEST_SAVE_AFTER=3 GM_TEST_STATE="$T/a0.{rank}.json.state" ||
  { cat "$T/a0.err" >&2; fail "first run (stops after 3 batches)"; }
$PY - "$T/a0.0.json.state" <<'PY' || fail "the saved state"
import json, sys
s = json.load(open(sys.argv[1]))["loader"]
assert (s["epoch"], s["position"], s["seed"], s["world_size"], s["rank"]) == (0, 3, 3, 1, 0), s
assert len(s["order"]) == 64 and s["split_index"] >= 1, s
PY
ok "the state names epoch, position, split, pipeline order, seed, world size and rank"
cp "$T/a0.0.json.state" "$T/b0.0.json.state"
run b0 3 1 "$T/pipeline.json" GM_TEST_STATE="$T/b0.{rank}.json.state" ||
  { cat "$T/b0.err" >&2; fail "second run (resumes)"; }
joined ref a0 b0 1 || fail "resume inside epoch 0 in a new run"
ok "resumed in a new run with 3 workers instead of 2: the same batches, in order, once"

# Inside epoch 1: the new run moves straight to epoch 1 (one worker now).
n0=$($PY -c "import json; print(len(json.load(open('$T/ref.0.json'))['batches'][0]))")
run a1 2 1 "$T/pipeline.json" GM_TEST_SAVE_AFTER=$((n0 + 2)) GM_TEST_STATE="$T/a1.{rank}.json.state" ||
  { cat "$T/a1.err" >&2; fail "first run (stops in epoch 1)"; }
cp "$T/a1.0.json.state" "$T/b1.0.json.state"
run b1 1 1 "$T/pipeline.json" GM_TEST_STATE="$T/b1.{rank}.json.state" ||
  { cat "$T/b1.err" >&2; fail "second run (resumes epoch 1)"; }
joined ref a1 b1 1 || fail "resume inside epoch 1 in a new run"
expect_in "$T/b1.err" "resumes at epoch 1" "the new run says it starts at the checkpoint's epoch"
ok "resumed inside epoch 1: epoch 0 is not made again, epoch 1 continues exactly"

# Two ranks: each saves its own state; both continue in a new run.
run a2 2 2 "$T/pipeline.json" GM_TEST_SAVE_AFTER=2 GM_TEST_STATE="$T/a2.{rank}.json.state" ||
  { cat "$T/a2.err" >&2; fail "first 2-rank run"; }
for r in 0 1; do cp "$T/a2.$r.json.state" "$T/b2.$r.json.state"; done
run b2 1 2 "$T/pipeline.json" GM_TEST_STATE="$T/b2.{rank}.json.state" ||
  { cat "$T/b2.err" >&2; fail "second 2-rank run"; }
joined ref2 a2 b2 2 || fail "2 ranks resumed in a new run"
ok "2 ranks resumed in a new run: each rank's share continues exactly"

# A state of another pipeline (another seed) is refused, with the reason.
sed 's/"seed": 3/"seed": 4/' "$T/pipeline.json" >"$T/seed4.json"
cp "$T/a0.0.json.state" "$T/c.0.json.state"
run c 1 1 "$T/seed4.json" GM_TEST_STATE="$T/c.{rank}.json.state"
rc=$?
[[ $rc == 3 ]] || { cat "$T/c.err" >&2; fail "a foreign state: exit $rc, expected the trainer's 3"; }
expect_in "$T/c.0.json" "belongs to another pipeline" "a state of another seed is refused"
expect_in "$T/c.0.json" "seed 3), and this run's is order" "the refusal names both seeds"

# A state of a position only (an older loader) cannot be resumed in a new run:
# the message says why instead of the connection just closing.
echo '{"loader": {"epoch": 0, "position": 5}, "seen": [], "labels": [], "batches": []}' \
  >"$T/d.0.json.state"
run d 1 1 "$T/pipeline.json" GM_TEST_STATE="$T/d.{rank}.json.state"
[[ $? == 3 ]] || { cat "$T/d.err" >&2; fail "a position-only state in a new run"; }
expect_in "$T/d.0.json" "the state has no split index" "a position-only state: the reason is given"

# A state past the run's last epoch.
$PY - "$T/a0.0.json.state" "$T/e.0.json.state" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["loader"]["epoch"] = 5
json.dump(c, open(sys.argv[2], "w"))
PY
gm_run e GM_TEST_STATE="$T/e.{rank}.json.state" -- --backend local --pipeline "$T/pipeline.json" \
  --workers 1 --epochs 2 --samples-per-split 8 --no-db \
  -- $PY "$SRC/tests/e2e/trainer.py" "$T/e.{rank}.json" 9
[[ $? == 3 ]] || { cat "$T/e.err" >&2; fail "a state past the run's epochs"; }
expect_in "$T/e.0.json" "this run serves epochs 0..1 (--epochs 2)" "a state past the last epoch"
done_suite
