#!/usr/bin/env bash
# End-to-end: the real `goldminer` binary, `worker --local` and the CLI around it.
source "$(dirname "$0")/lib.sh"

# --- the CLI
expect_rc 0 "--version" -- "$GM" --version
expect_in "$T/out" "goldminer 0.1.0" "--version prints the version"
for verb in profile plan run report worker; do
  expect_rc 0 "$verb --help" -- "$GM" "$verb" --help
done
expect_in "$T/out" "--pipeline" "worker --help lists --pipeline"
expect_rc 2 "plan without --profile is a usage error" -- "$GM" plan
expect_in "$T/err" "plan needs --profile profile.json" "plan says what it needs"
expect_rc 1 "report without a runs.db" -- "$GM" report --db "$T/none.db" -o "$T/r.html"
expect_in "$T/err" "$T/none.db does not exist" "report names the missing runs.db"
[[ ! -e $T/r.html && ! -e $T/none.db ]] || fail "report wrote something for a missing runs.db"
(unset SLURM_JOB_ID; expect_rc 1 "run --backend slurm outside a Slurm job" -- "$GM" run --backend slurm \
  --no-db --pipeline "$SRC/examples/imagenet/pipeline.json" -- true) || exit 1
expect_in "$T/err" "SLURM_JOB_ID is not set" "run says there is no allocation"
expect_rc 2 "run without --pipeline, its DataLoaders' offload off, exits 2" -- "$GM" run --offload off -- true
expect_in "$T/err" "run needs --pipeline FILE or --plan plan.json" "it says what run needs"
expect_rc 0 "run without --pipeline serves only the trainer's DataLoaders" -- "$GM" run --no-db --workers 1 -- true
expect_in "$T/err" "the trainer started no DataLoader with num_workers > 0" \
  "it says that a trainer without a DataLoader left the workers idle"
expect_rc 2 "an unknown flag exits 2" -- "$GM" worker --local --bogus
expect_rc 2 "a missing pipeline file exits 2" -- "$GM" worker --local --pipeline "$T/nope.json"
expect_in "$T/err" "nope.json" "the missing file is named"

# --- a corpus of real photos (two classes) and bad files
mkdir -p "$T/corpus/a" "$T/corpus/b"
for i in 0 1 2 3 4 5; do
  for c in 0 1 2; do cp "$SRC/tests/data/engine/photo$i.jpg" "$T/corpus/$([[ $((i % 2)) == 0 ]] && echo a || echo b)/$c-$i.jpg"; done
done
cat >"$T/pipeline.json" <<'JSON'
{ "version": 1,
  "source": {"type": "files", "root": "corpus", "pattern": "**/*.jpg", "label": "parent_dir"},
  "stages": [ {"op": "decode_jpeg"},
              {"op": "random_resized_crop", "size": [64, 64], "scale": [0.08, 1.0], "ratio": [0.75, 1.3333]},
              {"op": "flip", "p": 0.5},
              {"op": "normalize", "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]},
              {"op": "to_tensor", "layout": "CHW", "dtype": "float32"} ],
  "batch": {"size": 5, "drop_last": false}, "shuffle": {"buffer": 8}, "seed": 7, "on_error": "skip" }
JSON

expect_rc 0 "worker --local --json --digest" -- "$GM" worker --local --pipeline "$T/pipeline.json" --threads 1 --json --digest
$PY - "$T/out" <<'PY' || fail "JSON output has the documented fields"
import json, sys
j = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
for k in ("samples", "skipped", "seconds", "samples_per_s", "threads", "stages", "digest"):
    assert k in j, k
assert j["samples"] == 18 and j["skipped"] == 0 and j["threads"] == 1, j
names = [s["name"] for s in j["stages"]]
assert names == ["decode_jpeg+random_resized_crop", "flip+normalize+to_tensor"], names
for s in j["stages"]:
    for k in ("cpu_s_per_sample", "wall_s_per_sample", "bytes_in_per_sample", "bytes_out_per_sample"):
        assert s[k] >= 0, (s, k)
assert j["stages"][-1]["bytes_out_per_sample"] == 3 * 64 * 64 * 4
print(j["digest"])
PY
ok "JSON output has the documented fields"
digest1=$(tail -n 1 "$T/out" | $PY -c 'import json,sys; print(json.load(sys.stdin)["digest"])')
expect_rc 0 "same pipeline with 3 threads" -- "$GM" worker --local --pipeline "$T/pipeline.json" --threads 3 --json --digest
digest3=$(tail -n 1 "$T/out" | $PY -c 'import json,sys; print(json.load(sys.stdin)["digest"])')
[[ $digest1 == "$digest3" ]] || fail "digest differs between 1 and 3 threads: $digest1 vs $digest3"
ok "digest identical with 1 and 3 threads"

expect_rc 0 "the human table" -- "$GM" worker --local --pipeline "$T/pipeline.json" --epochs 2
expect_in "$T/out" "36 samples" "the table counts two epochs"
expect_in "$T/out" "decode_jpeg+random_resized_crop" "the table lists the fused stage"

expect_rc 0 "--out writes .npy batches" -- "$GM" worker --local --pipeline "$T/pipeline.json" --out "$T/batches"
$PY - "$T/batches" <<'PY' || fail ".npy batches load with numpy"
import glob, os, sys
import numpy as np
d = sys.argv[1]
data = sorted(f for f in glob.glob(os.path.join(d, "e0-b*.npy")) if not f.endswith(".labels.npy"))
assert len(data) == 4, data
x = np.load(data[0]); y = np.load(data[0].replace(".npy", ".labels.npy"))
assert x.shape == (5, 3, 64, 64) and x.dtype == np.float32, (x.shape, x.dtype)
assert y.dtype == np.int64 and set(y.tolist()) <= {0, 1}, y
assert np.isfinite(x).all() and -3 < x.min() < x.max() < 3
keys = open(os.path.join(d, "keys.tsv")).read().splitlines()
assert len(keys) == 18 and len({k.split("\t")[2] for k in keys}) == 18
PY
ok ".npy batches load with numpy, keys.tsv lists every sample once"

# --- bad input
for bad in zero truncated png_named random; do cp "$SRC/tests/data/engine/$bad.jpg" "$T/corpus/a/bad-$bad.jpg"; done
expect_rc 0 "bad files are skipped with on_error skip" -- "$GM" worker --local --pipeline "$T/pipeline.json" --json
expect_in "$T/err" "bad-truncated.jpg" "the skipped file is named in a warning"
tail -n 1 "$T/out" | $PY -c 'import json,sys; j=json.load(sys.stdin); assert j["skipped"]==4 and j["samples"]==18, j' \
  || fail "4 skipped, 18 delivered"
ok "4 skipped, 18 delivered"
sed 's/"on_error": "skip"/"on_error": "fail"/' "$T/pipeline.json" >"$T/fail.json"
expect_rc 1 "on_error fail stops the run" -- "$GM" worker --local --pipeline "$T/fail.json"
expect_in "$T/err" "bad-" "the failing file is named"

printf '{"version": 1,\n "source": {"type": "files", "root": "corpus"},\n "stages": [}\n' >"$T/syntax.json"
expect_rc 1 "a JSON syntax error" -- "$GM" worker --local --pipeline "$T/syntax.json"
expect_in "$T/err" "syntax.json:3:" "the syntax error names file and line"
sed 's/"size": \[64, 64\]/"size": "64"/' "$T/pipeline.json" >"$T/badsize.json"
expect_rc 1 "a wrong value type" -- "$GM" worker --local --pipeline "$T/badsize.json"
expect_in "$T/err" '$.stages[1].size' "the error names the JSON path"
sed 's/"version": 1/"version": 9/' "$T/pipeline.json" >"$T/v9.json"
expect_rc 1 "an unknown schema version" -- "$GM" worker --local --pipeline "$T/v9.json"
expect_in "$T/err" "version" "the error names the version"
sed 's/"seed": 7/"sead": 7/' "$T/pipeline.json" >"$T/typo.json"
expect_rc 1 "a misspelt key" -- "$GM" worker --local --pipeline "$T/typo.json"
expect_in "$T/err" 'unknown key "sead"' "the typo is named"

# --cpus: the worker runs on those CPUs only; a CPU it may not use, or a list that
# is not one, is refused naming it. `goldminer run`'s workers take the list from
# GOLDMINER_WORKER_CPUS (so they stay off the trainer's cores).
expect_rc 0 "worker --local --cpus 0" -- "$GM" worker --local --pipeline "$T/pipeline.json" --cpus 0 --no-progress
expect_rc 1 "a CPU this process may not use" -- "$GM" worker --local --pipeline "$T/pipeline.json" --cpus 4095
expect_in "$T/err" "CPU(s) 4095 are not available to this process" "the CPU is named, with the usable ones"
expect_rc 1 "a list that is not one" -- "$GM" worker --local --pipeline "$T/pipeline.json" --cpus 3-1
expect_in "$T/err" '"3-1" runs backwards' "the bad entry is named"
photo_corpus "$T/cpus/corpus"
small_pipeline "$T/cpus/p.json"
cat >"$T/cpus/aff.py" <<'PY'
import os
import goldminer
run_dir = os.environ["GOLDMINER_RUN_DIR"]
for pid in open(os.path.join(run_dir, "workers")).read().split():
    status = open(f"/proc/{pid}/status").read().splitlines()
    print("worker cpus", [l.split()[1] for l in status if l.startswith("Cpus_allowed_list")][0])
for _ in goldminer.Loader(epochs=1):
    pass
PY
GOLDMINER_WORKER_CPUS=0 expect_rc 0 "a run with GOLDMINER_WORKER_CPUS=0" -- \
  "$GM" run --backend local --pipeline "$T/cpus/p.json" --workers 2 --epochs 1 --no-db -- $PY "$T/cpus/aff.py"
[[ $(grep -c "^worker cpus 0$" "$T/out") == 2 ]] || { cat "$T/out" >&2; fail "the run's workers are not on CPU 0 only"; }
ok "the run's two workers run on CPU 0 only (/proc/PID/status)"

done_suite
