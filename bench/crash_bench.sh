#!/usr/bin/env bash
# Benchmark: what a coordinator's death costs a run. The same `goldminer run`
# (local backend, 2 workers, a trainer reading with goldminer.Loader) with its
# coordinator killed (kill -9 of `goldminer coordinator`, run's child) mid-epoch,
# and without, side by side in one invocation, alternating.
#
#   the pipeline: SAMPLES samples that each sleep 2 ms in a Python dataset, in
#   splits of 20 (a worker is a unit of capacity whatever this machine's speed);
#   the trainer kills the coordinator after batch KILL_AT (of SAMPLES/10).
#
# It prints the run's wall seconds (median of --repeat runs each way), the
# difference, the restarts run said, and the splits reassigned and the
# acknowledgements said again (the run's last line).
#
# usage: bench/crash_bench.sh [--build build] [--repeat 3] [--samples 2400] [--kill-at 60]
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$ROOT/build
REPEAT=3
SAMPLES=2400
KILL_AT=60
while (($#)); do
  case $1 in
    --build) BUILD=$(cd "$2" && pwd); shift 2 ;;
    --repeat) REPEAT=$2; shift 2 ;;
    --samples) SAMPLES=$2; shift 2 ;;
    --kill-at) KILL_AT=$2; shift 2 ;;
    -h | --help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "crash_bench: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
GM=$BUILD/cmd/goldminer
PY=/usr/bin/python3
[[ -x $GM ]] || { echo "crash_bench: no $GM: build first (cmake --build build)" >&2; exit 1; }
W=$(mktemp -d "${TMPDIR:-/tmp}/crash-bench-XXXXXX")
trap 'rm -rf "$W"' EXIT
cat >"$W/sleepy.py" <<PY
import time

import numpy as np


class Sleepy:
    def __len__(self):
        return $SAMPLES

    def __getitem__(self, i):
        time.sleep(0.002)
        return np.array([i], dtype=np.float32), i % 10


def make():
    return Sleepy()
PY
cat >"$W/pipeline.json" <<JSON
{ "version": 1, "source": {"type": "range", "count": $SAMPLES},
  "stages": [{"op": "exec", "cmd": ["$PY", "-m", "goldminer.dataset_stage", "sleepy:make"],
              "processes": 1}],
  "batch": {"size": 10}, "seed": 1 }
JSON
# One run: its wall seconds, then the run's last line.
one() {
  local name=$1 t0 t1
  shift
  t0=$(date +%s.%N)
  env "$@" PYTHONPATH="$W:$ROOT/python" timeout 600 "$GM" run --backend local \
    --pipeline "$W/pipeline.json" --workers 2 --samples-per-split 20 --no-db -- \
    $PY "$ROOT/tests/e2e/trainer.py" "$W/$name.json" 1 >"$W/$name.out" 2>"$W/$name.err" ||
    { cat "$W/$name.err" >&2; echo "crash_bench: run $name failed" >&2; exit 1; }
  t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f\n", b - a }'
}
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
calm=() killed=()
for ((i = 1; i <= REPEAT; i++)); do
  calm+=("$(one "calm$i" GM_BENCH=1)")
  killed+=("$(one "killed$i" GM_TEST_KILL_COORDINATOR_AFTER="$KILL_AT")")
  grep -qE "starting it again on .* from its journal" "$W/killed$i.err" ||
    { cat "$W/killed$i.err" >&2; echo "crash_bench: the coordinator was not started again" >&2; exit 1; }
done
c=$(printf '%s\n' "${calm[@]}" | median)
k=$(printf '%s\n' "${killed[@]}" | median)
echo "# $SAMPLES samples, 2 workers, the coordinator killed after batch $KILL_AT of $((SAMPLES / 10)); $REPEAT runs each way"
printf '%-34s %8s\n' "run" "wall s"
printf '%-34s %8s   (%s)\n' "undisturbed" "$c" "${calm[*]}"
printf '%-34s %8s   (%s)\n' "coordinator killed once" "$k" "${killed[*]}"
awk -v c="$c" -v k="$k" 'BEGIN { printf "%-34s %8.2f   (%.3fx)\n", "the death costs", k - c, k / c }'
echo "# the killed runs' last lines:"
for ((i = 1; i <= REPEAT; i++)); do tail -n 1 "$W/killed$i.err"; done
