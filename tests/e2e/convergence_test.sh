#!/usr/bin/env bash
# End-to-end: a model fed by goldminer with the shuffle on trains as well as one fed
# by torch's DataLoader(shuffle=True). 512 crops of 12 real photos (Debian's
# lomiri-wallpapers-16.04 and palapeli-data), one class per photo, laid out
# class/NNN.jpg (sorted by class, as ImageNet is); the same small CNN, seed and
# augmentation trains 30 steps on each feed (tests/e2e/convergence_train.py). The
# model fed by goldminer must end with a loss over the whole set no more than 20%
# above the DataLoader-fed one's. A control run in source order (no shuffle: every
# batch one or two classes) must miss that bound, so the check can tell.
source "$(dirname "$0")/lib.sh"

$PY - "$T/corpus" <<'PY' || fail "make the corpus (apt-get install lomiri-wallpapers-16.04 palapeli-data)"
import glob, os, random, sys
from PIL import Image
photos = sorted(glob.glob("/usr/share/backgrounds/*.jpg") + glob.glob("/usr/share/palapeli/*/*.jpg"))
assert len(photos) >= 12, f"{len(photos)} photos found, 12 needed"
rng = random.Random(1)
for c, path in enumerate(photos[:12]):
    os.makedirs(f"{sys.argv[1]}/c{c:02d}")
    with Image.open(path) as im:
        im = im.convert("RGB")
        im.thumbnail((320, 320))
        for i in range(512 // 12 + (c < 512 % 12)):
            w, h = im.size
            s = rng.randint(min(w, h) // 3, min(w, h))
            x, y = rng.randint(0, w - s), rng.randint(0, h - s)
            im.crop((x, y, x + s, y + s)).resize((48, 48)).save(
                f"{sys.argv[1]}/c{c:02d}/{i:03d}.jpg", quality=90)
PY
ok "512 crops of 12 real photos, sorted by class"
cat >"$T/pipeline.json" <<'JSON'
{"version": 1, "source": {"type": "files", "root": "corpus", "pattern": "**/*.jpg", "label": "parent_dir"},
 "stages": [{"op": "decode_jpeg"}, {"op": "random_resized_crop", "size": [32, 32]},
            {"op": "flip", "p": 0.5},
            {"op": "normalize", "mean": [0.5, 0.5, 0.5], "std": [0.25, 0.25, 0.25]},
            {"op": "to_tensor", "layout": "CHW", "dtype": "float32"}],
 "batch": {"size": 64}, "shuffle": true, "seed": 1}
JSON
sed 's/"shuffle": true, //' "$T/pipeline.json" >"$T/in_order.json"
TRAIN="$SRC/tests/e2e/convergence_train.py"
expect_rc 0 "train fed by torch's DataLoader(shuffle=True)" -- $PY "$TRAIN" torch "$T/corpus" "$T/torch.json"
expect_rc 0 "train fed by goldminer run with the shuffle on" -- "$GM" run --backend local \
  --pipeline "$T/pipeline.json" --workers 2 -- $PY "$TRAIN" goldminer "$T/corpus" "$T/goldminer.json"
expect_rc 0 "train fed by goldminer run in source order (the control)" -- "$GM" run --backend local \
  --pipeline "$T/in_order.json" --workers 2 -- $PY "$TRAIN" goldminer "$T/corpus" "$T/in_order.out.json"
$PY - "$T/torch.json" "$T/goldminer.json" "$T/in_order.out.json" <<'PY' || fail "goldminer's model trains as well as the DataLoader's"
import json, sys
t, g, c = (json.load(open(p)) for p in sys.argv[1:4])
print(f"# loss over the set after 30 steps: DataLoader {t['eval_loss']:.3f}, goldminer {g['eval_loss']:.3f}; "
      f"first/last training loss: DataLoader {t['train_losses'][0]:.3f}/{t['train_losses'][-1]:.3f}, "
      f"goldminer {g['train_losses'][0]:.3f}/{g['train_losses'][-1]:.3f}")
assert len(g["train_losses"]) == len(t["train_losses"]) == 30
assert t["eval_loss"] < t["train_losses"][0], "the DataLoader-fed model did not learn: the task is too hard"
print(f"# control, source order: {c['eval_loss']:.3f}")
assert g["eval_loss"] <= 1.2 * t["eval_loss"], "goldminer's loss is more than 20% above the DataLoader's"
assert c["eval_loss"] > 1.2 * t["eval_loss"], "the control in source order trained as well: the check cannot tell"
PY
ok "the goldminer-fed model ends within 20% of the DataLoader-fed one's loss"

# --offload native: the same unchanged script, its ImageFolder made by the engine's
# ops (random crops and flips drawn by goldminer), against the spread of stock runs
# whose DataLoaders draw from other seeds.
for seed in 0 1 2; do
  expect_rc 0 "train fed by stock's DataLoader, seed $seed" -- \
    $PY "$TRAIN" torch "$T/corpus" "$T/stock$seed.json" $seed
done
for seed in 0 1; do
  expect_rc 0 "train fed by goldminer run --offload native, seed $seed" -- "$GM" run \
    --backend local --workers 2 --offload native -- $PY "$TRAIN" torch "$T/corpus" \
    "$T/native$seed.json" $seed
done
$PY - "$T" <<'PY' || fail "the native-fed model trains as stock's do"
import json, statistics, sys
stock = [json.load(open(f"{sys.argv[1]}/stock{s}.json")) for s in range(3)]
native = [json.load(open(f"{sys.argv[1]}/native{s}.json")) for s in range(2)]
s = [r["eval_loss"] for r in stock]
n = [r["eval_loss"] for r in native]
lo, hi = min(s), max(s)
# The band: stock's spread, widened by half of it on each side (three seeds
# under-sample it), and at least 10% of stock's median.
pad = max((hi - lo) / 2, 0.1 * statistics.median(s))
print(f"# loss over the set after 30 steps: stock, seeds 0-2: {', '.join(f'{v:.3f}' for v in s)}; "
      f"native, seeds 0-1: {', '.join(f'{v:.3f}' for v in n)}; band {lo - pad:.3f}-{hi + pad:.3f}")
for r in stock + native:
    assert r["eval_loss"] < r["train_losses"][0], "a model did not learn"
assert all(lo - pad <= v <= hi + pad for v in n), "native's loss is outside stock's band"
PY
ok "the model fed by --offload native ends within stock's spread of losses"

done_suite
