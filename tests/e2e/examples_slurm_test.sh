#!/usr/bin/env bash
# End-to-end: the job scripts of examples/slurm/, as a user copies them, on the
# suite's private Slurm cluster (tests/e2e/slurm_cluster.sh: gpu1 gpu2 with GRES
# gpu:2 and consumable memory, cpu1 cpu2). Each example is copied with train.py (and
# plan.json) into a folder of its own beside a corpus in data/, the built goldminer
# is put first on PATH, and the script is submitted unchanged with sbatch from that
# folder. Each job must COMPLETE; train.py's lines must show every sample of every
# epoch exactly once; the run's last line and runs.db must show every worker
# registered (3 in one_node.sbatch's job, 2 on CPU nodes in hetjob.sbatch's); and the
# job's output must hold no warning or error line, nor CANCELLED or Killed.
# Needs Slurm (slurmctld, slurmd, munge), root and torch: the suite fails, never
# skips, without.
source "$(dirname "$0")/lib.sh"
# shellcheck source=tests/e2e/slurm_cluster.sh
source "$(dirname "$0")/slurm_cluster.sh"
GM=$(cd "$(dirname "$GM")" && pwd)/$(basename "$GM")
trap 'slurm_cluster_stop; rm -rf "$T"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
cd "$T" || fail "cd $T"
command -v sqlite3 >/dev/null || fail "sqlite3 is missing: run scripts/install-deps.sh"
[[ $(basename "$GM") == goldminer ]] || fail "the binary under test must be named goldminer: $GM"
$PY -c 'import torch, torchvision' 2>/dev/null || fail "torch and torchvision are needed for $PY"
slurm_cluster_start "$T/cluster" >/dev/null || fail "the Slurm cluster did not start"
ok "a Slurm cluster of 4 nodes is up"
# The scripts take goldminer and python3 from PATH, as a user's would: python3 is
# the interpreter with torch ($PY; a plain python3 on this machine's PATH may be
# another one).
mkdir -p "$T/bin"
ln -s "$PY" "$T/bin/python3"
export PATH="$T/bin:$(dirname "$GM"):$PATH"

# submit EXAMPLE FILES...: copies examples/slurm/EXAMPLE and FILES into $T/EXAMPLE
# beside a corpus in data/, submits it from there and waits for it to complete.
# Sets DIR, JOB and OUT (the job's output file).
submit() {
  local example=$1 f
  shift
  DIR=$T/${example%.sbatch}
  mkdir -p "$DIR"
  for f in "$example" "$@"; do cp "$SRC/examples/slurm/$f" "$DIR/" || fail "copy $f"; done
  photo_corpus "$DIR/data"
  JOB=$(cd "$DIR" && sbatch --parsable "$example" 2>"$T/sbatch.err") ||
    { cat "$T/sbatch.err" >&2; fail "sbatch refused examples/slurm/$example"; }
  JOB=${JOB%%;*}
  slurm_job_completes "$JOB" "$DIR/${example%.sbatch}-$JOB.out" 400 ||
    fail "examples/slurm/$example: job $JOB did not complete"
  OUT=$DIR/${example%.sbatch}-$JOB.out
  ok "examples/slurm/$example: job $JOB COMPLETED, ExitCode=0:0"
}

# every_sample_once OUT EPOCHS: train.py's per-epoch lines show the 36 samples of
# the corpus, each once, in each of EPOCHS epochs.
every_sample_once() {
  $PY - "$1" "$2" <<'PY' || { cat "$1" >&2; fail "train.py did not see every sample once per epoch"; }
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{"epoch"')]
assert [l["epoch"] for l in lines] == list(range(int(sys.argv[2]))), lines
assert all(l["samples"] == 36 and l["distinct"] == 36 for l in lines), lines
PY
  ok "train.py saw each of the 36 samples exactly once in each of $2 epochs"
}

# registered OUT DB N: the run's last line counts N worker registrations and no
# "M of N workers ran"; runs.db holds N workers for the run.
registered() {
  local last run n
  last=$(grep -E '^.*run [^ ]+ succeeded' "$1" | tail -n 1)
  [[ $last == *", $3 worker registrations"* && $last != *" workers ran"* ]] ||
    { cat "$1" >&2; fail "the run's last line does not count $3 worker registrations: $last"; }
  run=$(sqlite3 "$2" "SELECT id FROM runs ORDER BY rowid DESC LIMIT 1")
  n=$(sqlite3 "$2" "SELECT count(*) FROM workers WHERE run_id = '$run'")
  [[ $n == "$3" ]] || fail "runs.db: $n workers for run $run, expected $3"
  ok "the run registered its $3 workers (last line and runs.db)"
}

# 1. One GPU node: the trainer and its 3 data workers in one job.
submit one_node.sbatch train.py
every_sample_once "$OUT" 2
registered "$OUT" "$DIR/runs.db" 3
quiet_output "$OUT" "the job's output"

# 2. A heterogeneous job: the trainer on gpu, its 2 data workers in component 1 on
# the cpu partition's nodes (each slurmd has a UTS namespace of its own, so the
# workers' host names are their nodes').
submit hetjob.sbatch train.py plan.json
every_sample_once "$OUT" 2
registered "$OUT" "$DIR/runs.db" 2
hosts=$(sqlite3 "$DIR/runs.db" "SELECT group_concat(host, ' ') FROM workers")
[[ $hosts =~ ^cpu[12]\ cpu[12]$ ]] || fail "the hetjob's workers ran on '$hosts', not on cpu nodes"
ok "the hetjob's workers ran on the cpu partition's nodes ($hosts)"
quiet_output "$OUT" "the job's output"
done_suite
