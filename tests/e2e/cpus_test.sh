#!/usr/bin/env bash
# End-to-end: where a run's processes may run. `goldminer run --trainer-cpus`
# starts the trainer on those CPUs and the local workers on the others (the mask
# set before they start, so every thread they make has it);
# GOLDMINER_WORKER_CPUS places the workers instead; bad lists and lists that
# leave the workers nothing are refused before anything starts. Needs two CPUs.
source "$(dirname "$0")/lib.sh"

read -r FIRST LAST COUNT < <($PY -c 'import os; c = sorted(os.sched_getaffinity(0)); print(c[0], c[-1], len(c))')
[[ $COUNT -ge 2 ]] || fail "this suite needs at least 2 CPUs to divide (this process may use $COUNT)"
# A list as taskset writes it: runs as ranges.
cpu_list() {
  $PY - "$@" <<'PY'
import sys
cpus, runs = sorted(int(c) for c in sys.argv[1:]), []
for c in cpus:
    if runs and runs[-1][1] == c - 1:
        runs[-1][1] = c
    else:
        runs.append([c, c])
print(",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs))
PY
}
mapfile -t ALLOWED < <($PY -c 'import os; print(*sorted(os.sched_getaffinity(0)), sep="\n")')
ALL=$(cpu_list "${ALLOWED[@]}")
REST=$(cpu_list "${ALLOWED[@]:1}")

photo_corpus "$T/corpus"
small_pipeline "$T/pipeline.json"

# A trainer that reads every batch, then writes what the CPUs of each of its
# threads, and of each worker's threads, are (/proc/PID/task/TID/status).
cat >"$T/where.py" <<'PY'
import glob, json, os, sys
import goldminer

def cpus(pid):
    out = set()
    for status in glob.glob(f"/proc/{pid}/task/*/status"):
        try:
            lines = open(status).read().splitlines()
        except (FileNotFoundError, ProcessLookupError):  # the thread ended meanwhile
            continue
        for line in lines:
            if line.startswith("Cpus_allowed_list:"):
                out.add(line.split()[1])
    return sorted(out)

batches = sum(1 for _ in goldminer.Loader(epochs=1))
workers = [int(p) for p in open(os.path.join(os.environ["GOLDMINER_RUN_DIR"], "workers")).read().split()]
json.dump({"batches": batches, "trainer": cpus(os.getpid()),
           "workers": [cpus(p) for p in workers]}, open(sys.argv[1], "w"))
PY

where() {  # where OUT [run flags...]: a 2-worker run of where.py
  local out=$1; shift
  "$GM" run --backend local --pipeline "$T/pipeline.json" --workers 2 --epochs 1 --no-db \
    --no-progress "$@" -- $PY "$T/where.py" "$out"
}

expect_rc 0 "run --trainer-cpus $FIRST" -- where "$T/split.json" --trainer-cpus "$FIRST"
$PY - "$T/split.json" "$FIRST" "$REST" <<'PY' || fail "--trainer-cpus places the trainer and the workers apart"
import json, sys
got, first, rest = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
assert got["batches"] == 9, got
assert got["trainer"] == [first], got
assert len(got["workers"]) == 2 and all(w == [rest] for w in got["workers"]), got
PY
ok "the trainer's threads run on CPU $FIRST only, both workers' threads on $REST"
expect_in "$T/err" "run: the trainer on CPU(s) $FIRST, workers started here on CPU(s) $REST" \
  "run says where the trainer and the workers run"

# The workers on the trainer's CPU: the variable wins, with a warning.
expect_rc 0 "run --trainer-cpus with GOLDMINER_WORKER_CPUS" -- \
  env GOLDMINER_WORKER_CPUS="$FIRST" "$GM" run --backend local --pipeline "$T/pipeline.json" \
  --workers 2 --epochs 1 --no-db --no-progress --trainer-cpus "$FIRST" -- $PY "$T/where.py" "$T/env.json"
$PY - "$T/env.json" "$FIRST" <<'PY' || fail "GOLDMINER_WORKER_CPUS places the workers"
import json, sys
got, first = json.load(open(sys.argv[1])), sys.argv[2]
assert got["trainer"] == [first] and all(w == [first] for w in got["workers"]), got
PY
ok "GOLDMINER_WORKER_CPUS=$FIRST places the workers, --trainer-cpus the trainer"
expect_in "$T/err" "GOLDMINER_WORKER_CPUS=$FIRST shares CPU(s) $FIRST with --trainer-cpus $FIRST" \
  "run warns that the workers share the trainer's CPU"

expect_rc 0 "a run without --trainer-cpus" -- where "$T/any.json"
$PY - "$T/any.json" "$ALL" <<'PY' || fail "without the flag every process may use every CPU"
import json, sys
got, every = json.load(open(sys.argv[1])), sys.argv[2]
assert got["trainer"] == [every] and all(w == [every] for w in got["workers"]), (got, every)
PY
ok "without --trainer-cpus, trainer and workers may use every CPU"

expect_rc 1 "--trainer-cpus with every CPU is refused" -- where "$T/x.json" --trainer-cpus "$ALL"
expect_in "$T/err" "--trainer-cpus $ALL leaves no CPU for the workers" "the refusal says the workers get none"
expect_rc 1 "--trainer-cpus 4095 is refused" -- where "$T/x.json" --trainer-cpus 4095
expect_in "$T/err" "--trainer-cpus: CPU(s) 4095 are not available to this process" \
  "the refusal names the CPU and the ones this process may use"
expect_rc 1 "--trainer-cpus x is refused" -- where "$T/x.json" --trainer-cpus 0-x
expect_in "$T/err" "--trainer-cpus: \"0-x\" is not a CPU list" "the refusal names the text"
expect_rc 1 "--trainer-cpus under Slurm is refused" -- \
  env SLURM_JOB_ID=1 "$GM" run --backend slurm --pipeline "$T/pipeline.json" --workers 1 --no-db \
  --no-progress --trainer-cpus "$FIRST" -- $PY "$T/where.py" "$T/x.json"
expect_in "$T/err" "--trainer-cpus is for --backend local" "the refusal says why"
[[ ! -e "$T/x.json" ]] || fail "a refused run started its trainer"
ok "no refused run started a trainer"

# The worker's own flag.
expect_rc 0 "worker --local --cpus $LAST" -- "$GM" worker --local --pipeline "$T/pipeline.json" \
  --cpus "$LAST" --epochs 1 --no-progress --out "$T/pinned"
[[ $(wc -l <"$T/pinned/keys.tsv") == 36 ]] || fail "the pinned worker made every sample"
ok "a worker pinned with --cpus makes every sample"
expect_rc 1 "worker --cpus 4095 is refused" -- "$GM" worker --local --pipeline "$T/pipeline.json" \
  --cpus 4095 --epochs 1 --no-progress --out "$T/none"
expect_in "$T/err" "worker --cpus: CPU(s) 4095 are not available" "the worker's refusal names the CPU"
done_suite
