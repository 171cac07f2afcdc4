#!/usr/bin/env bash
# End-to-end: Python stages are as reproducible as native ops. A stage drawing from
# Python's random, numpy's and torch's global generators, and an unchanged
# torchvision ImageFolder with RandomResizedCrop and RandomHorizontalFlip, make the
# same bytes for the same seed across runs, stage thread (process) counts, worker
# counts and a killed worker; another epoch or seed draws anew.
source "$(dirname "$0")/lib.sh"

for c in a b; do
  mkdir -p "$T/photos/$c"
  for i in 0 1 2 3 4 5; do cp "$SRC/tests/data/engine/photo$i.jpg" "$T/photos/$c/$i.jpg"; done
done
cat >"$T/draws.py" <<'PY'
import random
import numpy as np
import torch

def draw(sample):
    # Three global generators, as user code draws from them without seeding.
    return np.array([random.random(), np.random.rand(), torch.rand(1).item(),
                     len(sample["data"])], dtype=np.float32)
PY
cat >"$T/folder.py" <<'PY'
import os
import torchvision
from torchvision import transforms

def make():
    t = transforms.Compose([transforms.RandomResizedCrop(24), transforms.RandomHorizontalFlip(),
                            transforms.PILToTensor()])
    return torchvision.datasets.ImageFolder(os.path.join(os.path.dirname(__file__), "photos"), t)
PY
cat >"$T/draws.json" <<'JSON'
{"version": 1, "source": {"type": "files", "root": "photos", "pattern": "**/*.jpg", "label": "parent_dir"},
 "stages": [{"op": "exec", "cmd": ["/usr/bin/python3", "-m", "goldminer.stage", "draws:draw"],
             "env": {"OMP_NUM_THREADS": "1"}}],
 "batch": {"size": 4}, "shuffle": true, "seed": 9}
JSON
cat >"$T/folder.json" <<'JSON'
{"version": 1, "source": {"type": "range", "count": 12},
 "stages": [{"op": "exec", "cmd": ["/usr/bin/python3", "-m", "goldminer.dataset_stage", "folder:make"],
             "env": {"OMP_NUM_THREADS": "1"}}],
 "batch": {"size": 4}, "shuffle": true, "seed": 9}
JSON
sed 's/"seed": 9/"seed": 10/' "$T/folder.json" >"$T/folder10.json"

cd "$T"
digest() {  # digest PIPELINE THREADS: worker --local's digest of 2 epochs
  "$GM" worker --local --pipeline "$1" --threads "$2" --epochs 2 --samples-per-split 4 --digest \
    --json --no-progress 2>"$T/err" | $PY -c 'import json,sys; print(json.loads(sys.stdin.read().splitlines()[-1])["digest"])' ||
    { cat "$T/err" >&2; fail "worker --local --pipeline $1 --threads $2"; }
}
for p in draws folder; do
  a=$(digest "$T/$p.json" 1); b=$(digest "$T/$p.json" 1); c=$(digest "$T/$p.json" 2)
  [[ -n $a && $a == "$b" ]] || fail "$p: two runs give $a and $b"
  ok "$p: the same digest on two runs ($a)"
  [[ $a == "$c" ]] || fail "$p: 1 and 2 stage processes give $a and $c"
  ok "$p: the same digest with 1 and 2 stage processes"
done
[[ $(digest "$T/folder10.json" 1) != "$(digest "$T/folder.json" 1)" ]] || fail "another seed draws the same"
ok "another seed draws other crops"

export GM_TEST_GOLDMINER=$GM
run() {  # run NAME PIPELINE WORKERS [env...]
  local name=$1 pipe=$2 workers=$3; shift 3
  ( (($# == 0)) || export "$@"
    run_trainer "$name" "run $name" -- --backend local --pipeline "$pipe" --workers "$workers" \
      --samples-per-split 4 --liveness-timeout 5 -- $PY "$SRC/tests/e2e/trainer.py" "$T/$name.json" 2 ) ||
    exit 1
}
for p in draws folder; do
  run "$p-1" "$T/$p.json" 1
  run "$p-2" "$T/$p.json" 2
  run "$p-kill" "$T/$p.json" 2 GM_TEST_KILL_AFTER=2
  expect_in "$T/$p-kill.err" "killed by signal 9" "$p: a worker was killed mid-epoch"
  $PY - "$T" "$p" <<'PY' || fail "$p: digests across workers"
import json, sys
t, p = sys.argv[1], sys.argv[2]
d = [json.load(open(f"{t}/{p}-{n}.json"))["digests"] for n in ("1", "2", "kill")]
assert len(d[0]) == 2 and d[0] == d[1] == d[2], d
assert d[0][0] != d[0][1], "epochs 0 and 1 drew the same"
PY
  ok "$p: the same bytes with 1 and 2 workers and after a worker is killed; epochs differ"
done

done_suite
