#!/usr/bin/env bash
# End-to-end: the shuffle gives batches a model can train on. On a corpus sorted by
# class (12 classes, as ImageNet's class/*.jpg is), every epoch `goldminer run`
# delivers is a permutation of the dataset, different per epoch and seed, the same
# for any number of workers or a killed one, and its batches mix the classes as a
# uniform permutation does. Tar shards (one class per shard) are read several at a
# time, interleaved. Without a shuffle key, run says it reads in source order. The
# trainer asks for its epochs (Loader(epochs=2)) and `run` serves them without
# --epochs.
source "$(dirname "$0")/lib.sh"

CLASSES=12 PER_CLASS=64 BATCH=64
# 768 files of 16 bytes each (raw bytes are the sample: no decoding needed),
# class/NNN.bin, so sorted by class.
$PY - "$T/corpus" $CLASSES $PER_CLASS <<'PY' || fail "make the corpus"
import os, sys
root, classes, per = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for c in range(classes):
    os.makedirs(f"{root}/c{c:02d}")
    for i in range(per):
        with open(f"{root}/c{c:02d}/{i:03d}.bin", "wb") as f:
            f.write(b"%016d" % (c * per + i))
PY
pipeline() {  # pipeline FILE SEED SHUFFLE_JSON
  cat >"$1" <<JSON
{"version": 1, "source": {"type": "files", "root": "corpus", "pattern": "**/*.bin", "label": "parent_dir"},
 "stages": [], "batch": {"size": $BATCH}, $3 "seed": $2}
JSON
}
pipeline "$T/p5.json" 5 '"shuffle": true,'
pipeline "$T/p6.json" 6 '"shuffle": true,'
pipeline "$T/plain.json" 5 ''

export GM_TEST_GOLDMINER=$GM
run() {  # run NAME PIPELINE WORKERS [VAR=value...]: the trainer reads 2 epochs under `goldminer run`
  local name=$1 pipe=$2 workers=$3; shift 3
  ( (($# == 0)) || export "$@"
    run_trainer "$name" "run $name" -- --backend local --pipeline "$pipe" --workers "$workers" \
      --liveness-timeout 5 -- $PY "$SRC/tests/e2e/trainer.py" "$T/$name.json" 2 ) || exit 1
}

# mixing NAME...: each epoch a permutation of the 768 samples; the mean number of
# distinct labels per batch of 64 within 5% of a uniform permutation's expectation,
# sum over classes of 1 - C(N - n_c, B) / C(N, B) (a batch draws B of N samples
# without replacement; n_c samples are of class c).
mixing() {
  $PY - "$T" $CLASSES $PER_CLASS $BATCH "$@" <<'PY'
import json, math, sys
t, classes, per, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
n = classes * per
want = classes * (1 - math.comb(n - per, batch) / math.comb(n, batch))
for name in sys.argv[5:]:
    r = json.load(open(f"{t}/{name}.json"))
    assert len(r["epochs"]) == 2, f"{name}: {len(r['epochs'])} epochs delivered, want 2"
    distinct = []
    for keys, labels in zip(r["epochs"], r["labels"]):
        assert sorted(keys) == sorted({k for k in keys}) and len(keys) == n, \
            f"{name}: an epoch of {len(keys)} keys ({len(set(keys))} distinct) is not a permutation of {n}"
        for b in range(0, n, batch):
            distinct.append(len(set(labels[b:b + batch])))
    mean = sum(distinct) / len(distinct)
    print(f"# {name}: {mean:.3f} distinct labels per batch of {batch}; a uniform permutation: {want:.3f}")
    assert abs(mean - want) <= 0.05 * want, f"{name}: {mean:.3f} against {want:.3f}"
PY
}
# same A B: the two runs delivered the same epochs in the same order.
same() {
  $PY -c 'import json,sys; a,b=(json.load(open(f)) for f in sys.argv[1:3]); sys.exit(0 if a["epochs"]==b["epochs"] else 1)' \
    "$T/$1.json" "$T/$2.json"
}

cd "$T"
run w1 "$T/p5.json" 1
expect_in "$T/w1.err" "2 epoch(s) delivered" "run serves the 2 epochs the trainer asks for, without --epochs"
run w2 "$T/p5.json" 2
run w3 "$T/p5.json" 3
run kill "$T/p5.json" 2 GM_TEST_KILL_AFTER=5
expect_in "$T/kill.err" "killed by signal 9" "a worker was killed mid-epoch"
mixing w1 w2 w3 kill || fail "batches mix the classes as a uniform permutation does"
ok "1, 2 and 3 workers and a killed worker: every epoch a permutation, batches mixed like a uniform shuffle"
same w1 w2 && same w1 w3 && same w1 kill || fail "the order depends on the seed only"
ok "the same seed gives the same order whatever the workers, and after a worker is killed"
$PY -c 'import json,sys; r=json.load(open(sys.argv[1])); sys.exit(0 if r["epochs"][0]!=r["epochs"][1] else 1)' "$T/w1.json" ||
  fail "epochs differ"
ok "epoch 1's order differs from epoch 0's"
run seed6 "$T/p6.json" 2
! same w1 seed6 || fail "another seed gives another order"
ok "another seed gives another order"
expect_rc 0 "worker --local makes the same epochs" -- "$GM" worker --local --pipeline "$T/p5.json" \
  --epochs 2 --out "$T/ref" --no-progress
$PY - "$T/ref/keys.tsv" "$T/w1.json" <<'PY' || fail "worker --local and run agree"
import json, sys
ref = [[], []]
for line in open(sys.argv[1]):
    e, _, k, _ = line.rstrip("\n").split("\t")
    ref[int(e)].append(k)
assert ref == json.load(open(sys.argv[2]))["epochs"]
PY
ok "worker --local delivers the same order as run"

# --- without a shuffle key: source order, and one line saying so ---------------------
run plain "$T/plain.json" 1
expect_in "$T/plain.err" "samples are read in source order" "run says it reads in source order"
[[ $(grep -c "source order" "$T/plain.err") == 1 ]] || fail "the source-order line is printed once"
ok "the source-order line is printed once"
$PY -c 'import json,sys; r=json.load(open(sys.argv[1])); k=r["epochs"][0]; sys.exit(0 if k==sorted(k) else 1)' "$T/plain.json" ||
  fail "source order"
ok "without a shuffle the epoch is in source (sorted) order"

# --- tar shards, one class per shard: read 4 at a time, interleaved --------------------
$PY - "$T/shards" $CLASSES $PER_CLASS <<'PY' || fail "make the shards"
import io, os, sys, tarfile
root, classes, per = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
os.makedirs(root)
for c in range(classes):
    with tarfile.open(f"{root}/shard-{c:02d}.tar", "w") as tar:
        for i in range(per):
            for ext, data in (("bin", b"%016d" % (c * per + i)), ("cls", b"%d" % c)):
                info = tarfile.TarInfo(f"s{c:02d}{i:03d}.{ext}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
PY
cat >"$T/tar.json" <<JSON
{"version": 1, "source": {"type": "tar", "urls": ["shards/shard-{00..11}.tar"]},
 "stages": [], "batch": {"size": 16}, "shuffle": {"buffer": 256, "shards": 4}, "seed": 5}
JSON
expect_rc 0 "worker --local reads the shuffled shards" -- "$GM" worker --local --pipeline "$T/tar.json" \
  --epochs 2 --out "$T/tar" --no-progress
expect_in "$T/err" "mixes 4 of 12 shards at a time" "a warning says how few shards a batch draws from"
$PY - "$T/tar/keys.tsv" $CLASSES $PER_CLASS <<'PY' || fail "shard epochs"
import sys
classes, per = int(sys.argv[2]), int(sys.argv[3])
epochs = [[], []]
for line in open(sys.argv[1]):
    e, b, k, _ = line.rstrip("\n").split("\t")
    epochs[int(e)].append((int(b), k.split("#")[0]))
for keys in epochs:
    assert len(keys) == classes * per, len(keys)
shard_orders = []
for e, keys in enumerate(epochs):
    batches = {}
    for b, shard in keys:
        batches.setdefault(b, []).append(shard)
    mean = sum(len(set(s)) for s in batches.values()) / len(batches)
    print(f"# epoch {e}: {mean:.2f} shards per batch of 16 (4 interleaved)")
    assert mean >= 3.5, f"epoch {e}: batches draw from {mean:.2f} shards on average"
    order = []
    for _, shard in keys:
        if shard not in order:
            order.append(shard)
    shard_orders.append(order)
assert shard_orders[0] != shard_orders[1], "the shard order is the same in both epochs"
PY
ok "tar epochs: every sample once, batches from 4 interleaved shards, shard order permuted per epoch"
$PY - "$T/tar/keys.tsv" <<'PY' || fail "tar samples once"
import collections, sys
count = collections.Counter((l.split("\t")[0], l.split("\t")[2]) for l in open(sys.argv[1]))
assert set(count.values()) == {1}, "a sample came twice in an epoch"
PY
ok "tar epochs hold every sample exactly once"

done_suite
