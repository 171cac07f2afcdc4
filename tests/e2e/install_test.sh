#!/usr/bin/env bash
# End-to-end: `cmake --install` to a prefix, then the installed binary runs the
# example pipelines, including Python exec stages found in the installed layout.
source "$(dirname "$0")/lib.sh"

expect_rc 0 "cmake --install to a prefix" -- cmake --install "$BUILD" --prefix "$T/prefix"
for f in bin/goldminer share/man/man1/goldminer.1 share/man/man1/goldminer-worker.1 \
         share/man/man1/goldminer-run.1 share/man/man7/goldminer-protocol.7 \
         lib/libgoldminer_client.so include/goldminer/client.h \
         share/man/man5/goldminer-pipeline.5 lib/goldminer/python/goldminer/stage.py; do
  [[ -f $T/prefix/$f ]] || fail "installed tree lacks $f"
  ok "installed $f"
done
expect_rc 0 "man renders the pipeline page" -- man -l "$T/prefix/share/man/man5/goldminer-pipeline.5"

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

done_suite
