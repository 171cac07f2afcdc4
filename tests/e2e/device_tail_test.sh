#!/usr/bin/env bash
# End-to-end: a pipeline that leaves normalize and to_tensor to the trainer's device
# ("on": "device"). Through `goldminer run` on real photos, the workers send uint8
# (a quarter of the bytes) and the trainer's goldminer.Loader (numpy) and
# goldminer.torch.DeviceLoader (device "cpu": torch, in its background thread) make the same float32 CHW
# batches as the pipeline run wholly on the workers: same keys in the same order,
# same labels, values within float32 rounding. `profile` names the pipeline's cut,
# and bad device stages are refused naming the stage.
source "$(dirname "$0")/lib.sh"

photo_corpus "$T/corpus"
write_pipeline() {  # write_pipeline FILE ON: ON is "" (all on the workers) or "device"
  local on=""
  [[ -n $2 ]] && on=", \"on\": \"$2\""
  cat >"$1" <<JSON
{ "version": 1,
  "source": {"type": "files", "root": "corpus", "pattern": "**/*.jpg", "label": "parent_dir"},
  "stages": [ {"op": "decode_jpeg"}, {"op": "random_resized_crop", "size": [24, 24]},
              {"op": "flip", "p": 0.5},
              {"op": "normalize", "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]$on},
              {"op": "to_tensor", "layout": "CHW", "dtype": "float32"$on} ],
  "batch": {"size": 4}, "shuffle": {"buffer": 8}, "seed": 5 }
JSON
}
write_pipeline "$T/cpu.json" ""
write_pipeline "$T/tail.json" device

cat >"$T/train.py" <<'PY'
"""Saves what the trainer receives: keys, labels and images per batch (npz)."""
import json
import sys

import numpy as np

import goldminer

out, kind = sys.argv[1], sys.argv[2]
if kind == "device":
    from goldminer.torch import DeviceLoader
    loader = DeviceLoader(device="cpu", prefetch=2, channels_last=True, epochs=2, thread=True)
    convert = lambda t: t.contiguous().numpy()
    stages = loader.loader.device_stages
else:
    loader = goldminer.Loader(epochs=2)
    convert = lambda a: a
    stages = loader.device_stages
keys, labels, images, epochs = [], [], [], []
for batch in loader:
    keys += list(batch["key"])
    epochs += [int(batch["epoch"])] * len(batch["key"])
    labels.append(np.asarray(batch["label"]))
    images.append(convert(batch["image"]))
np.savez(out, images=np.concatenate(images), labels=np.concatenate(labels))
json.dump({"keys": keys, "epochs": epochs, "stats": loader.stats(), "stages": stages},
          open(out + ".json", "w"))
PY

run() {  # run NAME PIPELINE KIND
  "$GM" run -v --backend local --pipeline "$2" --workers 2 --epochs 2 --samples-per-split 8 --no-db \
    -- $PY "$T/train.py" "$T/$1.npz" "$3" >"$T/$1.out" 2>"$T/$1.err"
}
run cpu "$T/cpu.json" numpy || { cat "$T/cpu.err" >&2; fail "the run with every stage on the workers"; }
ok "run with every stage on the workers"
run tail "$T/tail.json" numpy || { cat "$T/tail.err" >&2; fail "the run with a device tail (numpy)"; }
ok "run with normalize and to_tensor on the device, applied by goldminer.Loader"
run dev "$T/tail.json" device || { cat "$T/dev.err" >&2; fail "the run with a device tail (DeviceLoader)"; }
ok "run with the device tail applied by goldminer.torch.DeviceLoader on the CPU"

$PY - "$T" <<'PY' || fail "the device tail's batches differ from the CPU pipeline's"
import json, sys
import numpy as np
t = sys.argv[1]
ref = np.load(f"{t}/cpu.npz"); ref_meta = json.load(open(f"{t}/cpu.npz.json"))
assert len(ref_meta["keys"]) == 72, len(ref_meta["keys"])  # 36 photos, 2 epochs
assert ref["images"].shape == (72, 3, 24, 24) and ref["images"].dtype == np.float32
for name in ("tail", "dev"):
    got = np.load(f"{t}/{name}.npz"); meta = json.load(open(f"{t}/{name}.npz.json"))
    assert meta["keys"] == ref_meta["keys"], f"{name}: keys or their order differ"
    assert meta["epochs"] == ref_meta["epochs"], f"{name}: epochs differ"
    assert (got["labels"] == ref["labels"]).all(), f"{name}: labels differ"
    assert got["images"].shape == ref["images"].shape, (name, got["images"].shape)
    diff = float(np.abs(got["images"] - ref["images"]).max())
    assert diff <= 1e-5, f"{name}: largest difference {diff}"
    assert [s["op"] for s in meta["stages"]] == ["normalize", "to_tensor"], meta["stages"]
    # uint8 on the wire: a quarter of the float32 bytes (labels are 8 bytes each).
    wire, full = meta["stats"]["bytes"], ref_meta["stats"]["bytes"]
    assert wire - 72 * 8 == (full - 72 * 8) // 4, (name, wire, full)
print("equal within 1e-5; bytes received", ref_meta["stats"]["bytes"], "->", wire)
PY
ok "same keys, order, labels and values (within 1e-5) as the CPU pipeline; 4x fewer bytes received"
# The workers' last stage is the flip: once the client is connected, it writes
# each uint8 crop (mirrored or not) into the batch's segment, so those batches
# are not collated (batches made before are copied into a segment when sent).
in_place=$(sed -n 's/.*in shared memory (\([0-9]*\) written in place).*/\1/p' "$T/dev.err" |
  awk '{n += $1} END {print n + 0}')
(( in_place > 0 )) || { cat "$T/dev.err" >&2; fail "device tail: no batch was written in its segment by the flip"; }
ok "device tail: $in_place batches written in place by the flip, into the segment the trainer maps"

# profile names the cut the file makes; the device tail is measured on the CPU.
"$GM" profile --pipeline "$T/tail.json" --samples 16 -o "$T/profile.json" --no-db >"$T/out" 2>"$T/err" \
  || { cat "$T/err" >&2; fail "profile of the pipeline with a device tail"; }
$PY - "$T/profile.json" <<'PY' || fail "the profile does not name the pipeline's cut"
import json, sys
p = json.load(open(sys.argv[1]))["pipeline"]
cuts = [c["after_stage"] for c in p["cuts"] if c.get("pipeline_cut")]
assert cuts == [2], p["cuts"]
PY
expect_in "$T/out" "the pipeline's cut" "profile prints the pipeline's cut among the cut points"
grep -q "hint: the stages after" "$T/out" && fail "profile suggests a device tail the file already has"
ok "no hint to mark what the file already marks"

# Bad device stages are refused before anything runs, naming the stage.
bad() {  # bad NAME STAGES WANT: the CPU pipeline with STAGES (JSON) instead of its own
  $PY -c 'import json, sys; p = json.load(open(sys.argv[1])); p["stages"] = json.loads(sys.argv[2]); json.dump(p, open(sys.argv[3], "w"))' \
    "$T/cpu.json" "[$2]" "$T/$1.json" || fail "writing $1.json"
  expect_rc 1 "refused: $1" -- "$GM" run --backend local --pipeline "$T/$1.json" --workers 1 --no-db -- true
  expect_in "$T/err" "$3" "the refusal of $1 says why"
}
bad flip '{"op": "decode_jpeg"}, {"op": "flip", "on": "device"}' 'op "flip" cannot run "on": "device"'
bad order '{"op": "decode_jpeg"}, {"op": "to_tensor", "on": "device"}, {"op": "flip"}' 'the device stages must be the last ones'
bad first '{"op": "to_tensor", "on": "device"}' 'the first stage cannot run'
bad where '{"op": "decode_jpeg"}, {"op": "to_tensor", "on": "gpu"}' '$.stages[1].on: expected "worker" or "device"'
done_suite
