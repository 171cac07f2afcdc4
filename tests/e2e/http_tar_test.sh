#!/usr/bin/env bash
# End-to-end: WebDataset tar shards of real photos served by a real HTTP server,
# read by `goldminer worker --local`; a 404 shard is skipped (or fails the run).
source "$(dirname "$0")/lib.sh"

mkdir -p "$T/www"
$PY - "$SRC/tests/data/engine" "$T/www" <<'PY' || fail "make shards"
import io, sys, tarfile
src, out = sys.argv[1], sys.argv[2]
for shard in range(2):
    with tarfile.open(f"{out}/train-{shard:03d}.tar", "w", format=tarfile.GNU_FORMAT) as tar:
        for i in range(6):
            key = f"{shard:03d}{i:03d}"
            for name, data in ((f"{key}.jpg", open(f"{src}/photo{i}.jpg", "rb").read()),
                               (f"{key}.cls", str(i % 3).encode())):
                info = tarfile.TarInfo(name); info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
PY
ok "made 2 shards of 6 samples"

# The server prints its port once it listens: read it with a deadline.
coproc SERVER { exec $PY "$SRC/tests/http_server.py" "$T/www" 2>"$T/server.log"; }
server=$SERVER_PID
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null; rm -rf "$T"' EXIT
read -r -t 10 -u "${SERVER[0]}" port || fail "HTTP server did not start: $(cat "$T/server.log")"
[[ $port =~ ^[0-9]+$ ]] || fail "HTTP server did not report its port"
ok "HTTP server on port $port"

cat >"$T/pipeline.json" <<JSON
{ "version": 1,
  "source": {"type": "tar", "urls": ["http://127.0.0.1:$port/train-{000..001}.tar?sig=TOKEN123",
                                     "http://127.0.0.1:$port/missing-000.tar?sig=TOKEN123"]},
  "stages": [ {"op": "decode_jpeg"}, {"op": "center_crop", "size": 96},
              {"op": "to_tensor", "layout": "CHW", "dtype": "uint8"} ],
  "batch": {"size": 4}, "seed": 3, "on_error": "skip" }
JSON
expect_rc 0 "tar shards over http" -- "$GM" worker --local --pipeline "$T/pipeline.json" --json --out "$T/batches"
expect_in "$T/err" "missing-000.tar" "the 404 shard is named"
expect_in "$T/err" "404" "the warning says 404"
tail -n 1 "$T/out" | $PY -c 'import json,sys; j=json.load(sys.stdin); assert j["samples"] == 12 and j["skipped"] == 1, j' \
  || fail "12 samples, 1 skipped shard"
ok "12 samples delivered, the missing shard counted once"
$PY - "$T/batches" <<'PY' || fail "labels from .cls members and keys name the shard"
import glob, numpy as np
labels = np.concatenate([np.load(f) for f in sorted(glob.glob(__import__("sys").argv[1] + "/*.labels.npy"))])
assert sorted(labels.tolist()) == sorted([i % 3 for i in range(6)] * 2), labels
keys = [l.split("\t")[2] for l in open(__import__("sys").argv[1] + "/keys.tsv").read().splitlines()]
assert all("train-00" in k and "#" in k for k in keys) and len(set(keys)) == 12, keys
PY
ok "labels come from .cls members, keys name shard#basename"
if grep -q TOKEN123 "$T/batches/keys.tsv" "$T/err" "$T/out"; then fail "a URL's signed token reached the keys or the log"; fi
ok "a URL's query string (a signed token) stays out of sample keys and messages"

sed 's/"on_error": "skip"/"on_error": "fail"/' "$T/pipeline.json" >"$T/fail.json"
expect_rc 1 "a 404 shard fails the run with on_error fail" -- "$GM" worker --local --pipeline "$T/fail.json"
expect_in "$T/err" "missing-000.tar" "the failing URL is named"

done_suite
