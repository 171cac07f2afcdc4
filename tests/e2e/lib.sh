# Shared helpers for end-to-end suites: each suite is `bash suite.sh GOLDMINER BUILD_DIR`.
# A suite owns a temporary directory (removed on exit) and counts its checks; it
# exits non-zero on the first failed check, printing what was expected.
set -uo pipefail
GM=${1:?usage: suite.sh GOLDMINER BUILD_DIR}
BUILD=${2:?usage: suite.sh GOLDMINER BUILD_DIR}
SRC=${GOLDMINER_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
PY=/usr/bin/python3
T=$(mktemp -d "${TMPDIR:-/tmp}/goldminer-e2e-XXXXXX")
trap 'rm -rf "$T"' EXIT
# What the binary under test leaves in $TMPDIR when a test kills it with SIGKILL
# (a run's private directory) goes with the suite's own directory.
export TMPDIR=$T
checks=0

fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { checks=$((checks + 1)); echo "ok $checks - $*"; }

# expect_rc RC DESCRIPTION -- CMD...: runs CMD, stores stdout/stderr in $T/out, $T/err.
expect_rc() {
  local want=$1 what=$2; shift 3
  "$@" >"$T/out" 2>"$T/err"
  local rc=$?
  [[ $rc == "$want" ]] || { cat "$T/err" >&2; fail "$what: exit $rc, expected $want: $*"; }
  ok "$what"
}

# gm_run NAME [VAR=value...] -- RUN_ARGS...: `goldminer run RUN_ARGS...` with that
# environment, within 300 s, its output in $T/NAME.out and $T/NAME.err; returns its
# exit status (124: it hung), for suites that expect a run to fail.
gm_run() {
  local name=$1 env=()
  shift
  while [[ $# -gt 0 && $1 != -- ]]; do env+=("$1"); shift; done
  shift
  env "${env[@]}" timeout 300 "$GM" run "$@" >"$T/$name.out" 2>"$T/$name.err"
}

# run_trainer NAME WHAT -- RUN_ARGS...: gm_run, and the suite fails saying WHAT (with
# the run's stderr) unless it succeeds. Environment for the run goes before the
# call (VAR=value run_trainer ...).
run_trainer() {
  local name=$1 what=$2; shift 3
  gm_run "$name" -- "$@" || { cat "$T/$name.err" >&2; fail "$what: the run failed"; }
}

# expect_in FILE TEXT DESCRIPTION
expect_in() {
  grep -qF -- "$2" "$1" || { echo "--- $1:" >&2; cat "$1" >&2; fail "$3: '$2' not in $1"; }
  ok "$3"
}

done_suite() { echo "$checks passed, 0 failed"; }

# quiet_output FILE WHAT [ALLOWED_ERE]: a normal run's output (a job's, or a run's
# stderr) holds no warning or error line, nor a cancelled step ("CANCELLED") or a
# killed task ("Killed"). ALLOWED_ERE names the lines a test provokes on purpose
# (a worker it kills, a pool it stops), which are then not counted.
quiet_output() {
  local file=$1 what=$2 allowed=${3:-} noisy
  noisy=$(grep -Ei 'warning|error|CANCELLED|Killed' "$file" | { if [[ -n $allowed ]]; then grep -Ev -- "$allowed"; else cat; fi; })
  if [[ -n $noisy ]]; then
    echo "--- $file:" >&2
    cat "$file" >&2
    echo "--- the lines:" >&2
    echo "$noisy" >&2
    fail "$what: the output holds a warning or error line (or CANCELLED, Killed)"
  fi
  ok "$what: no warning, error, CANCELLED or Killed line"
}

# ours PID: true when this suite started the process: it inherits TMPDIR=$T (Slurm
# steps too: sbatch exports the environment). Other suites may run meanwhile with
# processes of their own.
ours() { tr '\0' '\n' <"/proc/$1/environ" 2>/dev/null | grep -qx "TMPDIR=$T"; }

# suite_pgrep PATTERN: "PID COMMAND" of this suite's processes matching PATTERN (pgrep -f).
suite_pgrep() {
  local pid
  for pid in $(pgrep -f "$1"); do
    ours "$pid" && echo "$pid $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)"
  done
}

# photo_corpus DIR: 36 small real photos (six of tests/data/engine, six copies each),
# in DIR/a and DIR/b by the photo's parity (two labels).
photo_corpus() {
  mkdir -p "$1/a" "$1/b"
  local c i
  for c in 0 1 2 3 4 5; do
    for i in 0 1 2 3 4 5; do
      cp "$SRC/tests/data/engine/photo$i.jpg" "$1/$([[ $((i % 2)) == 0 ]] && echo a || echo b)/$c-$i.jpg"
    done
  done
}

# small_pipeline FILE: a pipeline over FILE's folder's corpus/ (photo_corpus): decode,
# a 32x32 crop, uint8 CHW tensors, batches of 4.
small_pipeline() {
  cat >"$1" <<'JSON'
{ "version": 1,
  "source": {"type": "files", "root": "corpus", "pattern": "**/*.jpg", "label": "parent_dir"},
  "stages": [ {"op": "decode_jpeg"}, {"op": "random_resized_crop", "size": [32, 32]},
              {"op": "to_tensor", "layout": "CHW", "dtype": "uint8"} ],
  "batch": {"size": 4}, "seed": 3 }
JSON
}

# slow_pipeline FILE: a pipeline whose cost is a 10 ms sleep per sample in a Python
# dataset (FILE's folder's sleepy.py, 400 samples, batches of 10, one child process
# per worker), so a worker's rate (about 100 samples/s) does not depend on this
# machine's speed.
slow_pipeline() { sleepy_pipeline "$1" 400 0.01; }

# exactly_once RESULT COUNT: the trainer's RESULT (JSON {"epochs": [[key, ...],
# ...]}, no "error") has COUNT distinct keys in every epoch, none twice, and none a
# malicious test worker made up ("forged..."). Exits non-zero, saying why.
exactly_once() {
  $PY - "$1" "$2" <<'PY'
import json, sys
r, n = json.load(open(sys.argv[1])), int(sys.argv[2])
assert "error" not in r, r
for e, keys in enumerate(r["epochs"]):
    assert len(keys) == len(set(keys)) == n, f"epoch {e}: {len(keys)} keys, {len(set(keys))} distinct"
    assert not any(str(k).startswith("forged") for k in keys), f"epoch {e}: a forged sample was delivered"
PY
}

# sleepy_pipeline FILE COUNT SLEEP_S: like slow_pipeline, with COUNT samples that
# each sleep SLEEP_S seconds (FILE's folder's sleepy.py).
sleepy_pipeline() {
  local dir
  dir=$(dirname "$1")
  cat >"$dir/sleepy.py" <<PY
import time

import numpy as np


class Sleepy:
    def __len__(self):
        return $2

    def __getitem__(self, i):
        time.sleep($3)
        return np.array([i], dtype=np.float32), i % 10


def make():
    return Sleepy()
PY
  cat >"$1" <<JSON
{ "version": 1, "source": {"type": "range", "count": $2},
  "stages": [{"op": "exec", "cmd": ["$PY", "-m", "goldminer.dataset_stage", "sleepy:make"],
              "processes": 1}],
  "batch": {"size": 10}, "seed": 1 }
JSON
}
