#!/usr/bin/env bash
# End-to-end: `cmake --install` to a prefix, then the installed binary runs the
# example pipelines, including Python exec stages found in the installed layout.
source "$(dirname "$0")/lib.sh"

expect_rc 0 "cmake --install to a prefix" -- cmake --install "$BUILD" --prefix "$T/prefix"
for f in bin/goldminer share/man/man1/goldminer.1 share/man/man1/goldminer-worker.1 \
         share/man/man1/goldminer-run.1 share/man/man7/goldminer-protocol.7 \
         lib/libgoldminer_client.so include/goldminer/client.h \
         lib/libgoldminer_native.so include/goldminer/native.h \
         share/man/man5/goldminer-pipeline.5 lib/goldminer/python/goldminer/stage.py \
         share/man/man1/goldminer-profile.1 share/man/man5/goldminer-runs.db.5 \
         share/man/man1/goldminer-simulate.1 share/man/man1/goldminer-pool.1 \
         share/goldminer/data/alibaba-gpu-v2023/openb_pod_list_default.csv \
         share/goldminer/data/alibaba-gpu-v2023/README.md \
         lib/goldminer/python/goldminer/_profile_hook/sitecustomize.py; do
  [[ -f $T/prefix/$f ]] || fail "installed tree lacks $f"
  ok "installed $f"
done
expect_rc 0 "man renders the pipeline page" -- man -l "$T/prefix/share/man/man5/goldminer-pipeline.5"

# The modulefile, as a cluster's users load it (Lmod, from scripts/install-deps.sh).
[[ -f /usr/share/lmod/lmod/init/bash ]] || fail "Lmod is missing: run scripts/install-deps.sh"
bash -c 'source /usr/share/lmod/lmod/init/bash && module use "$1/share/modulefiles" &&
  module load goldminer && command -v goldminer && echo "root=$GOLDMINER_ROOT" && man -w goldminer-pool &&
  /usr/bin/python3 -c "import goldminer, sys; print(goldminer.__file__)" &&
  module unload goldminer && { command -v goldminer || echo "unloaded"; }' _ "$T/prefix" \
  >"$T/module.out" 2>&1 || { cat "$T/module.out" >&2; fail "module load goldminer failed"; }
for want in "$T/prefix/bin/goldminer" "root=$T/prefix" "$T/prefix/share/man/man1/goldminer-pool.1" \
            "$T/prefix/lib/goldminer/python/goldminer/__init__.py" "unloaded"; do
  grep -qxF "$want" "$T/module.out" || { cat "$T/module.out" >&2; fail "module load goldminer: no '$want'"; }
done
ok "module load goldminer puts the prefix's binary, man pages and Python package in reach; unload takes them away"

cp -r "$SRC/examples/exec_stage" "$T/exec"
# Run from a directory unrelated to the source tree, with no PYTHONPATH.
cd "$T"
expect_rc 0 "installed binary runs a Python exec stage" -- \
  env -u PYTHONPATH "$T/prefix/bin/goldminer" worker --local --pipeline "$T/exec/pipeline.json" --json
tail -n 1 "$T/out" | $PY -c 'import json,sys; j=json.load(sys.stdin); assert j["samples"] > 0 and j["skipped"] == 0, j' \
  || fail "exec stage delivered samples"
ok "exec stage delivered every sample"
expect_rc 0 "installed binary serves a map-style dataset" -- \
  env -u PYTHONPATH "$T/prefix/bin/goldminer" worker --local --pipeline "$T/exec/dataset_pipeline.json" --json --threads 2
tail -n 1 "$T/out" | $PY -c 'import json,sys; j=json.load(sys.stdin); assert j["samples"] == 100 and j["batches"] == 10, j' \
  || fail "dataset stage delivered 100 samples in 10 batches"
ok "dataset stage delivered 100 samples in 10 batches"

expect_rc 0 "installed run feeds a Python trainer through the installed client library" -- \
  env -u PYTHONPATH -u GOLDMINER_CLIENT_LIB "$T/prefix/bin/goldminer" run \
  --pipeline "$T/exec/dataset_pipeline.json" --workers 1 -- \
  $PY -c 'import goldminer; print(sum(len(b["key"]) for b in goldminer.Loader()))'
[[ $(tail -n 1 "$T/out") == 100 ]] || fail "the trainer received 100 samples, got: $(cat "$T/out")"
ok "the trainer received all 100 samples"

# --offload native's virtual workers load the installed engine library.
expect_rc 0 "the installed Python package loads the installed native library" -- \
  env -u GOLDMINER_NATIVE_LIB $PY -c "import sys; sys.path.insert(0, '$T/prefix/lib/goldminer/python')
from goldminer import _native, loader
print(loader.find_library('libgoldminer_native.so', 'worker', 'GOLDMINER_NATIVE_LIB', 'x'))
print(_native.library().gm_native_abi_version())"
[[ $(tail -n 2 "$T/out" | head -n 1) == "$T/prefix/lib/libgoldminer_native.so" && $(tail -n 1 "$T/out") == 1 ]] \
  || fail "the installed libgoldminer_native.so was not the one loaded: $(cat "$T/out")"
ok "the installed package found lib/libgoldminer_native.so"

# The CUPTI library is installed wherever CUDA's CUPTI was found at build time.
if [[ -f /usr/local/cuda/include/cupti.h ]]; then
  [[ -f $T/prefix/lib/libgoldminer_cupti.so ]] || fail "installed tree lacks lib/libgoldminer_cupti.so"
  ok "installed lib/libgoldminer_cupti.so"
fi

cat >"$T/torch_prog.py" <<'PY'
import torch
loader = torch.utils.data.DataLoader(list(range(64)), batch_size=4)
for epoch in range(2):
    for batch in loader:
        pass
PY
expect_rc 0 "installed profile measures an unmodified torch program through the installed hook" -- \
  env -u PYTHONPATH -u GOLDMINER_PYTHONPATH "$T/prefix/bin/goldminer" profile --no-db -o "$T/p.json" \
  --steps 10 --warmup-steps 2 -- $PY "$T/torch_prog.py"
$PY -c 'import json,sys; t=json.load(open(sys.argv[1]))["trainer"]; assert t["source"] == "torch" and t["steps"] == 10 and t["batch_size"] == 4, t' "$T/p.json" \
  || fail "the installed profile measured 10 torch steps"
ok "the installed profile measured 10 torch steps of batch 4"

done_suite
