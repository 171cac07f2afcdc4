#!/usr/bin/env bash
# End-to-end: `goldminer plan` against a private Slurm cluster (tests/e2e/slurm_cluster.sh:
# gpu1 gpu2 in partition gpu, 8 CPUs and 2 fake GPUs each; cpu1 cpu2 in the default
# partition cpu, 8 CPUs each). From a hand-written profile whose figures make the plan
# computable by hand: the worker count, size and placement, the prediction, the job
# script (heterogeneous when workers go to CPU nodes) that Slurm accepts, a plain job
# submitted for real that runs `goldminer run --plan`, the plans recorded in runs.db,
# bad inputs refused without writing anything, the division of CPUs across jobs
# (--jobs), and `run --plan` on the local backend.
# Needs Slurm (slurmctld, slurmd, munge) and root: the suite fails, never skips, without.
source "$(dirname "$0")/lib.sh"
# shellcheck source=tests/e2e/slurm_cluster.sh
source "$(dirname "$0")/slurm_cluster.sh"
trap 'slurm_cluster_stop; rm -rf "$T"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
# The suite works in $T: a relative GOLDMINER is made absolute first.
[[ $GM == */* ]] && GM=$(cd "$(dirname "$GM")" && pwd)/$(basename "$GM")
cd "$T" || fail "cd $T"

# check_py WHAT ARGS... <<'PY': runs the Python on stdin (json imported, approx() given)
# with ARGS as sys.argv[1:]; fails the suite with its traceback when an assert fails.
check_py() {
  local what=$1
  shift
  { echo 'import json, sys'
    echo 'def approx(a, b, tol=1e-6): return abs(a - b) <= tol * max(1.0, abs(b))'
    cat; } >"$T/check.py"
  $PY "$T/check.py" "$@" 2>"$T/check.err" || { cat "$T/check.err" >&2; fail "$what"; }
  ok "$what"
}

# ---------------------------------------------------------------------------------------
# 1. Fixture: a real pipeline (so that `run --plan` works) and a profile written by hand.
photo_corpus "$T/corpus"
cat >"$T/pipeline.json" <<'JSON'
{ "version": 1,
  "source": {"type": "files", "root": "corpus", "pattern": "**/*.jpg", "label": "parent_dir"},
  "stages": [ {"op": "decode_jpeg"}, {"op": "random_resized_crop", "size": [32, 32]} ],
  "batch": {"size": 4}, "shuffle": {"buffer": 8}, "seed": 3, "on_error": "fail" }
JSON

# The figures: 10 ms CPU per sample with one stage thread; 1 thread delivers 100/s
# (efficiency 1.0), 4 threads 320/s (efficiency 320 * 0.01 / 4 = 0.8, 80/s per CPU).
# The model interpolates linearly between the two runs: a k-CPU worker delivers
# k * e(k) / 0.01 with e(1) = 1, e(2) = 0.9333, e(3) = 0.8667, e(4) = 0.8: 100, 186.7,
# 260 and 320 samples/s; the CPU need is counted at --cpus-per-worker's 80/s per CPU.
# The full cut (after stage 1, the only one `run` executes) sends 100 kB per sample,
# 0.8 Mb per sample: far below the 10 Gb/s NICs at these rates. Each worker needs 1 GiB.
# The trainer consumes 1500 samples/s.
# (with_demand DEMAND prints the profile; the trainer part goes when DEMAND is "none".)
with_demand() {
  local trainer=
  [[ $1 != none ]] && trainer=',
  "trainer": {
    "command": ["/bin/true"], "source": "goldminer", "workers": 4,
    "steps": 50, "seconds": 2.0, "samples_per_s": 1000.0, "batch_size": 64,
    "step_s_median": 0.064, "wait_s_median": 0.0213, "compute_s_median": 0.0427,
    "demand_samples_per_s": '"$1"', "stall_fraction": 0.333,
    "gpu": {"available": false, "reason": "no CUDA device"},
    "step_list": [{"step": 1, "wait_s": 0.02, "compute_s": 0.04, "samples": 64}]
  }'
  cat <<JSON
{
  "schema": "goldminer.profile", "version": 1,
  "created_utc": "2026-11-30T00:00:00Z", "host": "test", "cores": 4,
  "goldminer_version": "test",
  "verdict": "input-bound", "input_bound_fraction": 0.333,
  "pipeline": {
    "path": "$T/pipeline.json", "batch_size": 4, "warmup_samples": 8, "samples": 100,
    "runs": [
      {"threads": 1, "samples": 100, "seconds": 1.0, "cpu_s": 1.0, "samples_per_s": 100.0},
      {"threads": 4, "samples": 400, "seconds": 1.25, "cpu_s": 4.0, "samples_per_s": 320.0}
    ],
    "cpu_s_per_sample": 0.01, "stage_cpu_s_per_sample": 0.009,
    "samples_per_s_per_core": 80.0, "peak_rss_bytes": 1073741824,
    "stages": [
      {"index": 0, "name": "decode_jpeg", "stateless": true, "cpu_s_per_sample": 0.007,
       "bytes_in_per_sample": 50000, "bytes_out_per_sample": 150000},
      {"index": 1, "name": "random_resized_crop", "stateless": true, "cpu_s_per_sample": 0.002,
       "bytes_in_per_sample": 150000, "bytes_out_per_sample": 100000}
    ],
    "cuts": [
      {"after_stage": -1, "allowed": true, "bytes_per_sample": 50000,
       "remote_cpu_s_per_sample": 0.0, "local_cpu_s_per_sample": 0.009},
      {"after_stage": 0, "allowed": true, "bytes_per_sample": 150000,
       "remote_cpu_s_per_sample": 0.007, "local_cpu_s_per_sample": 0.002},
      {"after_stage": 1, "allowed": true, "bytes_per_sample": 100000,
       "remote_cpu_s_per_sample": 0.009, "local_cpu_s_per_sample": 0.0}
    ]
  }$trainer
}
JSON
}
P=$T/profile.json
with_demand 1500 >"$P"
# The trainer, quick and without a GPU: one epoch of the 36 samples.
TRAINER=("$PY" "$SRC/tests/e2e/trainer.py")
export GM_TEST_GOLDMINER=$GM
echo '{"schema": "goldminer.cluster", "version": 1, "partitions": [{"name": "p", "default": true}],
       "nodes": [{"name": "n", "partitions": ["p"], "cpus": 64}]}' >"$T/big-cluster.json"
expect_rc 0 "plan reads the hand-written profile (a 64-CPU cluster.json)" -- \
  "$GM" plan --profile "$P" --cluster "$T/big-cluster.json" -o "$T/fixture-plan.json" --no-db

# ---------------------------------------------------------------------------------------
# 2. The plan for the Slurm cluster.
command -v sqlite3 >/dev/null || fail "sqlite3 (the command-line shell) is needed to read runs.db"
slurm_cluster_start "$T/cluster" || fail "the private Slurm cluster did not start (see above)"
ok "the private Slurm cluster is up (4 nodes idle)"

expect_rc 0 "plan --slurm writes plan.json, job.sbatch and a row in runs.db" -- \
  "$GM" plan --slurm --profile "$P" -o "$T/plan.json" --sbatch "$T/job.sbatch" --db "$T/runs.db"
cp "$T/out" "$T/summary.txt"
# By hand (planner/model.cc): the trainer goes to the GPU partition's node with the most
# free GPUs, then CPUs, then by name: gpu1, 1 GPU, keeping --trainer-cpus 1 CPU, so 7 are
# spare. Target: the trainer's demand, 1500/s = 18.75 worker CPUs at 80/s each.
# Workers on the trainer's node first, each the smallest (up to 4 CPUs and the spare
# ones) that covers what remains, else the largest: 4 CPUs (320/s), then 3 CPUs
# (260/s): 580/s. Then whole 4-CPU workers on the default partition's nodes (cpu1,
# cpu2: 8 free CPUs each, ties by name): 320 + 320 on cpu1, then 280 of the last
# worker's 320 on cpu2. 5 workers, 19 CPUs, 1500/s; the network carries the 920/s of
# the CPU nodes' workers x 100 kB = 92 MB/s.
check_py "plan.json holds the plan computed by hand (gpu1 4+3 CPUs, cpu1 4+4, cpu2 4; 1500/s)" \
  "$T/plan.json" "$T/pipeline.json" <<'PY'
p = json.load(open(sys.argv[1]))
assert p["schema"] == "goldminer.plan" and p["version"] == 1, p
m, pr, run = p["model"], p["prediction"], p["run"]
assert approx(m["scaling_efficiency"], 0.8) and approx(m["samples_per_s_per_cpu"], 80), m
assert approx(m["target_samples_per_s"], 1500) and m["target_source"] == "trainer demand", m
assert approx(m["cpus_needed"], 18.75) and m["gpus"] == 1, m
assert m["memory_per_worker_bytes"] == 1073741824, m
assert p["sources"]["cluster"] == "slurm", p["sources"]
assert p["sources"]["gpu_partition"] == "gpu" and p["sources"]["partition"] == "cpu", p["sources"]
assert p["trainer_nodes"] == [{"name": "gpu1", "gpus": 1, "cpus": 1}], p["trainer_nodes"]
got = [(w["node"], w["partition"], w["cpus"], w["on_trainer_node"], round(w["samples_per_s"], 6))
       for w in p["workers"]]
want = [("gpu1", "gpu", 4, True, 320), ("gpu1", "gpu", 3, True, 260),
        ("cpu1", "cpu", 4, False, 320), ("cpu1", "cpu", 4, False, 320),
        ("cpu2", "cpu", 4, False, 280)]
assert got == want, got
# Workers on gpu1 also hold the 8 shared-memory batches they lend the trainer
# (8 x 4 samples x 100 kB at the cut).
assert all(w["memory_bytes"] == 1073741824 + (8 * 4 * 100000 if w["on_trainer_node"] else 0)
           for w in p["workers"]), p["workers"]
assert approx(pr["samples_per_s"], 1500), pr
assert pr["limit"] == "none" and approx(pr["shortfall_samples_per_s"], 0), pr
assert pr["worker_cpus"] == 19, pr
assert approx(pr["network_bytes_per_s"], 920 * 100000), pr
assert approx(pr["stall_fraction"], 0, 1e-9), pr
# The cut: only the full one (after stage 1) is runnable, and chosen.
assert p["cut"]["after_stage"] == 1 and p["cut"]["runnable"], p["cut"]
assert [(c["after_stage"], c["runnable"], c["chosen"]) for c in p["cuts"]] == \
    [(-1, False, False), (0, False, False), (1, True, True)], p["cuts"]
assert run == {"pipeline": sys.argv[2], "workers": 5, "threads_per_worker": 4,
               "worker_threads": [4, 3, 4, 4, 4], "world_size": 1,
               "command": ["/bin/true"]}, run
PY
expect_in "$T/summary.txt" "plan: 5 worker(s), 19 worker CPU(s), for 1500 samples/s" \
  "the summary names the workers, their CPUs and the predicted rate"
expect_in "$T/summary.txt" "none: the target is met" "the summary says no limit binds"

# ---------------------------------------------------------------------------------------
# 3. The job script: a heterogeneous job (trainer node + CPU nodes) that Slurm accepts.
# --mem per node in each component (sbatch refuses --mem beside --mem-per-cpu in a
# hetjob): component 0, the trainer's default 4096 MB for its GPU rank + gpu1's two
# workers, each 1 GiB + 8 x 4 x 100 kB = 1076941824 bytes, 1028 MB rounded up: 6152 MB;
# component 1, at most 2 workers on a CPU node (cpu1's) x 1024 MB: 2048 MB.
check_py "job.sbatch: component 0 gpu (8 CPUs, gpu:1, --mem=6152M), hetjob, component 1 cpu (3 tasks x 4 CPUs, 2 a node, --mem=2048M)" \
  "$T/job.sbatch" "$T/plan.json" "$GM" <<'PY'
lines = open(sys.argv[1]).read().splitlines()
sb = [l for l in lines if l.startswith("#SBATCH")]
assert "#SBATCH hetjob" in sb, sb
het = sb.index("#SBATCH hetjob")
c0, c1 = sb[:het], sb[het + 1:]
for want in ["--partition=gpu", "--nodes=1", "--cpus-per-task=8", "--gres=gpu:1", "--mem=6152M"]:
    assert "#SBATCH " + want in c0, (want, c0)
for want in ["--partition=cpu", "--ntasks=3", "--ntasks-per-node=2", "--cpus-per-task=4",
             "--mem=2048M"]:
    assert "#SBATCH " + want in c1, (want, c1)
assert len([l for l in c0 if l.startswith("#SBATCH --mem")]) == 1, c0
assert len([l for l in c1 if l.startswith("#SBATCH --mem")]) == 1, c1
assert not any("gres" in l for l in c1), c1
assert not any("--mem-per-cpu" in l for l in sb), sb
# The comments say where each figure came from; the old "No --mem" one is gone.
text = "\n".join(lines)
assert "4096M for the trainer (a default, 4096M per GPU rank" in text, text
assert "+ 2056M for the 2 worker(s) on its busiest node" in text and "= 6152M." in text, text
assert "at most 2 worker(s) on a node (--ntasks-per-node)" in text and "= 2048M." in text, text
assert "No --mem" not in text, text
assert lines[0] == "#!/bin/bash", lines[0]
import os
assert lines[-1] == "exec " + os.path.realpath(sys.argv[3]) + " run --plan " + sys.argv[2] + " -- /bin/true", lines[-1]
PY
expect_rc 0 "sbatch --test-only accepts the heterogeneous job" -- timeout 30 sbatch --test-only "$T/job.sbatch"
expect_in "$T/err" "to start at" "sbatch --test-only says when the heterogeneous job would start"

# ---------------------------------------------------------------------------------------
# 5. runs.db: one plan, one event of kind 'plan'.
plans() { sqlite3 "$T/runs.db" 'select count(*) from plans'; }
events() { sqlite3 "$T/runs.db" "select count(*) from events where kind = 'plan'"; }
[[ $(plans) == 1 && $(events) == 1 ]] || fail "runs.db after one plan: $(plans) plans, $(events) plan events"
ok "runs.db: 1 row in plans and 1 event of kind 'plan'"
sqlite3 "$T/runs.db" 'select json from plans where id = 1' >"$T/recorded.json"
check_py "runs.db's plans.json is plan.json's plan" "$T/recorded.json" "$T/plan.json" <<'PY'
assert json.load(open(sys.argv[1])) == json.load(open(sys.argv[2]))
PY

# The trainer's demand above what the cluster has: 2000/s needs 25 worker CPUs at 80/s,
# the cluster gives 7 (gpu1: 320 + 260) + 16 (cpu1, cpu2: 4 x 320) = 23 CPUs, 1860/s,
# limit "cpus". Without --target-rate the target is the demand, and plan writes its
# best plan (exit 0).
with_demand 2000 >"$T/profile2000.json"
expect_rc 0 "a demand above the cluster's CPUs: plan writes the best plan" -- \
  "$GM" plan --slurm --profile "$T/profile2000.json" -o "$T/plan2000.json" --db "$T/runs.db"
# (The highest rate that fits is found by bisection, to 1e-9 of the target.)
check_py "demand 2000/s: 1860/s with every spare CPU (7 on gpu1, 16 on cpu1/cpu2), limit cpus" "$T/plan2000.json" <<'PY'
p = json.load(open(sys.argv[1]))
pr = p["prediction"]
assert approx(pr["samples_per_s"], 1860, 1e-5) and pr["worker_cpus"] == 23, pr
assert pr["limit"] == "cpus" and approx(pr["shortfall_samples_per_s"], 140, 1e-4), pr
assert "23 CPUs" in pr["limit_detail"] and "needs 25.0 CPUs (2.0 more)" in pr["limit_detail"], pr["limit_detail"]
assert "short by 140 samples/s" in pr["limit_detail"], pr["limit_detail"]
assert approx(pr["stall_fraction"], 0.07, 1e-4), pr
assert [w["cpus"] for w in p["workers"]] == [4, 3, 4, 4, 4, 4], p["workers"]
PY
[[ $(plans) == 2 && $(events) == 2 ]] || fail "runs.db after two plans: $(plans) plans, $(events) plan events"
ok "runs.db: the second plan adds a row and an event"

# ---------------------------------------------------------------------------------------
# 4. Workers that all fit on the trainer's node: a plain job, accepted and run for real.
# 500/s: 4 CPUs (320/s), then for the remaining 180/s the smallest worker that covers
# it, 2 CPUs (186.7/s), on gpu1 beside the trainer's CPU: 7 CPUs of gpu1's 8.
expect_rc 0 "plan --target-rate 500 (every worker on the trainer's node)" -- \
  "$GM" plan --slurm --profile "$P" --target-rate 500 -o "$T/plan500.json" --sbatch "$T/job500.sbatch" \
  --db "$T/runs.db" -- "${TRAINER[@]}" "$T/slurm-trainer.json" 1
check_py "plan --target-rate 500: 2 workers on gpu1 (4 + 2 CPUs), the trainer command from --" \
  "$T/plan500.json" "$SRC/tests/e2e/trainer.py" "$T/slurm-trainer.json" <<'PY'
p = json.load(open(sys.argv[1]))
assert [(w["node"], w["cpus"], w["on_trainer_node"]) for w in p["workers"]] == \
    [("gpu1", 4, True), ("gpu1", 2, True)], p["workers"]
assert approx(p["prediction"]["samples_per_s"], 500) and p["prediction"]["limit"] == "none", p["prediction"]
assert p["model"]["target_source"] == "--target-rate", p["model"]
assert p["run"]["workers"] == 2 and p["run"]["command"] == ["/usr/bin/python3", sys.argv[2], sys.argv[3], "1"], p["run"]
PY
# --mem: the trainer's 4096 MB + 2 workers x 1028 MB (as in job.sbatch).
check_py "job500.sbatch: a plain job (no hetjob) on gpu with 7 CPUs, gpu:1 and --mem=6152M" "$T/job500.sbatch" <<'PY'
sb = [l for l in open(sys.argv[1]).read().splitlines() if l.startswith("#SBATCH")]
assert "#SBATCH hetjob" not in sb and not any("--ntasks=" in l for l in sb), sb
assert len([l for l in sb if l.startswith("#SBATCH --mem")]) == 1, sb
for want in ["--partition=gpu", "--nodes=1", "--cpus-per-task=7", "--gres=gpu:1", "--mem=6152M"]:
    assert "#SBATCH " + want in sb, (want, sb)
PY
expect_rc 0 "sbatch --test-only accepts the plain job" -- timeout 30 sbatch --test-only "$T/job500.sbatch"
expect_in "$T/err" "to start at" "sbatch --test-only says when the plain job would start"
[[ $(plans) == 3 ]] || fail "runs.db after three plans: $(plans) plans"
ok "runs.db: 3 plans"

# Submitted for real: the job runs `goldminer run --plan` (local backend) in the allocation.
timeout 90 sbatch --parsable --wait --output="$T/job.out" "$T/job500.sbatch" >"$T/out" 2>"$T/err"
rc=$?
job=$(head -n 1 "$T/out")
job=${job%%;*}
[[ $job =~ ^[0-9]+$ ]] || { cat "$T/err" >&2; fail "sbatch --wait printed no job id (exit $rc)"; }
state=$(timeout 10 scontrol show job "$job" --oneliner 2>&1)
[[ $rc == 0 && $state == *" JobState=COMPLETED "* && $state == *" ExitCode=0:0 "* ]] ||
  { echo "--- job.out:" >&2; cat "$T/job.out" >&2; fail "job $job: sbatch --wait exit $rc; $state"; }
ok "the plain job $job ran: COMPLETED, ExitCode=0:0"
expect_in "$T/job.out" ", 2 workers, 1 trainer rank(s)" "in the job, run --plan started the planned 2 workers"
# Each worker gets its planned CPUs as stage threads: 4 and 2.
expect_in "$T/job.out" "run: plan $T/plan500.json: 2 worker(s), 4+2 thread(s)" "in the job, run read the plan"
check_py "the job's trainer got the 36 samples once" "$T/slurm-trainer.json" <<'PY'
j = json.load(open(sys.argv[1]))
keys = j["epochs"][0]
assert len(j["epochs"]) == 1 and len(keys) == 36 and len(set(keys)) == 36, j["epochs"]
PY

# ---------------------------------------------------------------------------------------
# 6. Bad input: exit 1, stderr names the input, nothing written (plan.json, job script,
# runs.db, temporary files: the folder stays empty).
# refused NAME WHAT TEXT... -- PLAN-ARGS...
refused() {
  local name=$1 what=$2 texts=() t
  shift 2
  while [[ $1 != -- ]]; do texts+=("$1"); shift; done
  shift
  local d=$T/bad/$name
  mkdir -p "$d"
  "$GM" plan "$@" -o "$d/plan.json" --sbatch "$d/job.sbatch" --db "$d/runs.db" >"$T/out" 2>"$T/err"
  local rc=$?
  [[ $rc == 1 ]] || { cat "$T/err" >&2; fail "$what: exit $rc, expected 1"; }
  for t in "${texts[@]}"; do
    grep -qF -- "$t" "$T/err" || { echo "--- stderr:" >&2; cat "$T/err" >&2; fail "$what: '$t' not on stderr"; }
  done
  [[ ! -e $d/plan.json ]] || fail "$what: $d/plan.json was written"
  [[ -z $(ls -A "$d") ]] || fail "$what: left in $d: $(ls -A "$d")"
  sed "s/^/    /" "$T/err"
  ok "$what: exit 1, stderr names it, nothing written"
}

sed 's/"version": 1,/"version": 2,/' "$P" >"$T/profile-v2.json"
refused v2 "a profile of version 2" "$T/profile-v2.json" "version 2" "version 1" -- \
  --slurm --profile "$T/profile-v2.json"
refused plan-as-profile "a plan.json given as --profile" "$T/plan.json" '"goldminer.profile"' -- \
  --slurm --profile "$T/plan.json"
echo '{"schema": "goldminer.cluster", "version": 1, "nodes": [],
       "partitions": [{"name": "p", "default": true}]}' >"$T/empty-cluster.json"
refused empty-cluster "a cluster.json without nodes" "$T/empty-cluster.json" "has no nodes" -- \
  --cluster "$T/empty-cluster.json" --profile "$P"
refused nosuch-partition "--partition nosuch" "--partition nosuch" "no such partition" "it has: gpu, cpu" -- \
  --slurm --partition nosuch --profile "$P"
with_demand none >"$T/profile-no-trainer.json"
refused no-trainer "a profile without a trainer part and no --target-rate" "$T/profile-no-trainer.json" \
  "no trainer part" "--target-rate" -- --slurm --profile "$T/profile-no-trainer.json"

# An impossible target. Above the trainer's demand (1500/s), the plan is made for the
# demand and the trainer is what binds; with no demand known (no trainer part), the
# cluster's CPUs bind: the 23 spare CPUs deliver 1860/s (as above).
refused huge-target "--target-rate 1000000 above the trainer's demand" \
  "--target-rate 1000000 cannot be met: trainer" "the trainer consumes at most 1500 samples/s" \
  "Nothing was written" -- --slurm --profile "$P" --target-rate 1000000
refused huge-target-cpus "--target-rate 1000000 without a trainer part" \
  "--target-rate 1000000 cannot be met: cpus" "the workers can have 23 CPUs" "Nothing was written" -- \
  --slurm --profile "$T/profile-no-trainer.json" --target-rate 1000000
[[ $(plans) == 3 && $(events) == 3 ]] || fail "runs.db after refused plans: $(plans) plans, $(events) events (expected 3)"
ok "runs.db: refused plans are not recorded (still 3 plans, 3 events)"

# The same with --best-effort: the best plan is written, and says what binds.
expect_rc 0 "--target-rate 1000000 --best-effort writes the best plan" -- \
  "$GM" plan --slurm --profile "$P" --target-rate 1000000 --best-effort -o "$T/plan-best.json" --db "$T/runs.db"
check_py "the best-effort plan: the trainer's 1500/s (19 CPUs), limit trainer" "$T/plan-best.json" <<'PY'
pr = json.load(open(sys.argv[1]))["prediction"]
assert pr["limit"] == "trainer", pr
assert pr["worker_cpus"] == 19 and approx(pr["samples_per_s"], 1500), pr
assert approx(pr["shortfall_samples_per_s"], 1000000 - 1500), pr
PY
expect_rc 0 "--target-rate 1000000 --best-effort without a trainer part writes the best plan" -- \
  "$GM" plan --slurm --profile "$T/profile-no-trainer.json" --target-rate 1000000 --best-effort \
  -o "$T/plan-best-cpus.json" --db "$T/runs.db"
check_py "the best-effort plan without a trainer: every spare CPU (23), 1860/s, limit cpus" "$T/plan-best-cpus.json" <<'PY'
pr = json.load(open(sys.argv[1]))["prediction"]
assert pr["limit"] == "cpus" and "stall_fraction" not in pr, pr
# (The highest rate that fits is found by bisection to 1e-6 of the target: within 1/s.)
assert pr["worker_cpus"] == 23 and abs(pr["samples_per_s"] - 1860) <= 1, pr
assert abs(pr["shortfall_samples_per_s"] - (1000000 - 1860)) <= 1, pr
PY
[[ $(plans) == 5 && $(events) == 5 ]] || fail "runs.db after five plans: $(plans) plans, $(events) events"
ok "runs.db: each written plan adds a row and an event (5)"

# Every GPU taken by another job: no partition has a free GPU for the trainer.
timeout 30 sbatch --parsable -p gpu -N2 --gres=gpu:2 --output="$T/hold.out" --wrap 'sleep 300' >"$T/out" 2>"$T/err" ||
  { cat "$T/err" >&2; fail "submitting a job that holds the 4 GPUs"; }
hold=$(head -n 1 "$T/out")
hold=${hold%%;*}
for ((i = 0; i < 150; i++)); do
  [[ $(timeout 10 squeue -h -j "$hold" -o %T 2>/dev/null) == RUNNING ]] && break
  sleep 0.2
done
[[ $(timeout 10 squeue -h -j "$hold" -o %T 2>/dev/null) == RUNNING ]] || fail "job $hold (all GPUs) is not running after 30 s"
ok "job $hold holds the 4 GPUs"
refused gpus-taken "every GPU allocated" "GPU partition gpu" "0 free GPU" -- --slurm --profile "$P"
timeout 10 scancel "$hold" || fail "scancel $hold"
for ((i = 0; i < 150; i++)); do
  timeout 10 scontrol show node gpu1,gpu2 --oneliner >"$T/nodes" 2>&1
  [[ $(grep -c 'State=IDLE ' "$T/nodes") == 2 ]] && ! grep -q 'AllocTRES=[^ ]*gres/gpu=' "$T/nodes" && break
  sleep 0.2
done
[[ $(grep -c 'State=IDLE ' "$T/nodes") == 2 ]] || { cat "$T/nodes" >&2; fail "gpu1, gpu2 not idle 30 s after scancel $hold"; }
expect_rc 0 "with the GPUs freed, plan --slurm places the trainer again" -- \
  "$GM" plan --slurm --profile "$P" -o "$T/plan-again.json" --no-db

daemons=$(cat "$T/cluster/pids/"*)
slurm_cluster_stop
for pid in $daemons; do
  [[ -e /proc/$pid ]] && ! grep -q '^State:[[:space:]]*Z' "/proc/$pid/status" 2>/dev/null &&
    fail "pid $pid ($(tr '\0' ' ' <"/proc/$pid/cmdline")) still runs after slurm_cluster_stop"
done
ok "the Slurm cluster is stopped: none of its daemons runs"

# ---------------------------------------------------------------------------------------
# 7. Dividing 20 CPUs across two jobs (planner/divide.cc): CPUs go one at a time to the
# job whose normalised throughput min(x * rate, demand) / demand gains most.
# Job A (the profile above): 80/s per CPU, demand 1500: each CPU adds 80/1500 = 0.0533.
# Job B: 20 ms per sample, 4 threads deliver 160/s (efficiency 0.8): 40/s per CPU,
# demand 600: each CPU adds 40/600 = 0.0667 until 15 CPUs saturate it.
# So B gets 15 CPUs (600/s, 4 workers), A the other 5 (400/s, 2 workers). An equal
# split (10 + 10) gives A 800/s and B 400/s: 1.2 normalised against 1.267.
$PY - "$P" "$T/profile-b.json" <<'PY' || fail "writing profile B"
import json, sys
p = json.load(open(sys.argv[1]))
p["pipeline"]["cpu_s_per_sample"] = 0.02
p["pipeline"]["runs"] = [{"threads": 1, "samples": 50, "seconds": 1.0, "samples_per_s": 50.0},
                         {"threads": 4, "samples": 200, "seconds": 1.25, "samples_per_s": 160.0}]
p["trainer"]["demand_samples_per_s"] = 600.0
json.dump(p, open(sys.argv[2], "w"), indent=1)
PY
expect_rc 0 "plan --jobs A B --cpus 20 --json" -- \
  "$GM" plan --jobs "$P" "$T/profile-b.json" --cpus 20 --json
cp "$T/out" "$T/division.json"
check_py "the division by hand: B 15 CPUs (saturated, 600/s), A 5 CPUs (400/s); equal split worse" \
  "$T/division.json" "$P" "$T/profile-b.json" <<'PY'
d = json.load(open(sys.argv[1]))
assert d["schema"] == "goldminer.division" and d["cpus"] == 20 and d["cpus_unused"] == 0, d
a, b = d["jobs"]
assert a["profile"] == sys.argv[2] and b["profile"] == sys.argv[3], d["jobs"]
assert approx(a["samples_per_s_per_cpu"], 80) and approx(b["samples_per_s_per_cpu"], 40), d["jobs"]
assert (a["cpus"], a["workers"], b["cpus"], b["workers"]) == (5, 2, 15, 4), d["jobs"]
assert approx(a["samples_per_s"], 400) and approx(b["samples_per_s"], 600), d["jobs"]
assert approx(a["normalized"], 400 / 1500) and approx(b["normalized"], 1.0), d["jobs"]
assert (a["equal_cpus"], b["equal_cpus"]) == (10, 10), d["jobs"]
assert approx(a["equal_samples_per_s"], 800) and approx(b["equal_samples_per_s"], 400), d["jobs"]
assert approx(a["speedup"], 0.5) and approx(b["speedup"], 1.5), d["jobs"]
assert approx(d["normalized_sum"], 400 / 1500 + 1) and approx(d["equal_normalized_sum"], 800 / 1500 + 400 / 600), d
# The greedy rule itself, recomputed.
jobs = [(1500, 80), (600, 40)]
given = [0, 0]
for _ in range(20):
    gains = [(min((g + 1) * r, dem) - min(g * r, dem)) / dem for (dem, r), g in zip(jobs, given)]
    best = max(range(2), key=lambda i: (gains[i], -i))
    if gains[best] <= 1e-12:
        break
    given[best] += 1
assert given == [a["cpus"], b["cpus"]], given
PY

# ---------------------------------------------------------------------------------------
# 8. The local backend: one 4-CPU node without GPUs, 1-CPU workers, no CPU kept for the
# trainer: one 1-CPU worker delivers 100/s (the 1-thread run), so 250/s takes three
# (100 + 100 + 50/s).
cat >"$T/local-cluster.json" <<'JSON'
{"schema": "goldminer.cluster", "version": 1,
 "partitions": [{"name": "local", "default": true}],
 "nodes": [{"name": "local", "partitions": ["local"], "cpus": 4, "memory_mb": 16000}]}
JSON
expect_rc 0 "plan for a one-node cluster.json (4 CPUs, no GPU)" -- \
  "$GM" plan --profile "$P" --cluster "$T/local-cluster.json" --trainer-cpus 0 --cpus-per-worker 1 \
  --target-rate 250 -o "$T/plan-local.json" --no-db
check_py "the local plan: no GPU, 3 one-CPU workers on node local, 250/s" "$T/plan-local.json" <<'PY'
p = json.load(open(sys.argv[1]))
assert p["model"]["gpus"] == 0 and p["sources"]["gpu_partition"] == "", p
assert p["trainer_nodes"] == [{"name": "local", "gpus": 0, "cpus": 0}], p["trainer_nodes"]
assert [(w["node"], w["cpus"], w["on_trainer_node"]) for w in p["workers"]] == [("local", 1, True)] * 3, p["workers"]
assert [round(w["samples_per_s"], 6) for w in p["workers"]] == [100, 100, 50], p["workers"]
assert approx(p["prediction"]["samples_per_s"], 250) and p["prediction"]["limit"] == "none", p["prediction"]
assert approx(p["model"]["samples_per_s_per_cpu"], 100) and approx(p["model"]["cpus_needed"], 2.5), p["model"]
assert p["run"]["workers"] == 3 and p["run"]["threads_per_worker"] == 1 and p["run"]["world_size"] == 1, p["run"]
PY
expect_rc 0 "run --plan (local backend) with a quick trainer exits 0" -- timeout 60 \
  "$GM" run --plan "$T/plan-local.json" --db "$T/local.db" --name planned -- \
  "${TRAINER[@]}" "$T/local-trainer.json" 1
expect_in "$T/err" ", 3 workers, 1 trainer rank(s)" "run --plan started the planned 3 workers"
expect_in "$T/err" "plan-local.json was not recorded in runs.db: recorded it as plan 1" \
  "run --plan records a plan made with --no-db"
check_py "the local run's trainer got the 36 samples once" "$T/local-trainer.json" <<'PY'
keys = json.load(open(sys.argv[1]))["epochs"][0]
assert len(keys) == 36 and len(set(keys)) == 36, keys
PY
[[ $(sqlite3 "$T/local.db" "SELECT plan_id FROM runs WHERE id = 'planned'") == 1 ]] ||
  fail "the run does not point at its plan: $(sqlite3 "$T/local.db" 'SELECT id, plan_id FROM runs')"
ok "runs.db: the run points at its plan's row"
# The report reads the plan from runs.db, not from the file: it still shows it when
# plan.json is gone.
mv "$T/plan-local.json" "$T/plan-local.moved"
expect_rc 0 "report of the run --plan run, plan.json moved away" -- \
  "$GM" report --db "$T/local.db" --run planned --format text -o "$T/planned.txt"
expect_in "$T/planned.txt" "plan       250 samples/s predicted" "the report shows the plan's prediction"
mv "$T/plan-local.moved" "$T/plan-local.json"
expect_rc 0 "the same plan run again" -- timeout 60 \
  "$GM" run --plan "$T/plan-local.json" --db "$T/local.db" --name planned-again -- \
  "${TRAINER[@]}" "$T/local-trainer.json" 1
grep -q "was not recorded in runs.db" "$T/err" && fail "the same plan was recorded twice"
[[ $(sqlite3 "$T/local.db" "SELECT count(*) FROM plans") == 1 &&
   $(sqlite3 "$T/local.db" "SELECT plan_id FROM runs WHERE id = 'planned-again'") == 1 ]] ||
  fail "the second run does not share the plan's row: $(sqlite3 "$T/local.db" 'SELECT id, plan_id FROM runs')"
ok "a plan run twice has one row, which both runs point at"

# A plan that keeps a CPU for the trainer: on the local backend, run pins the trainer
# to the first CPU this process may use and the workers to the others.
read -r FIRST REST < <($PY -c 'import os; c = sorted(os.sched_getaffinity(0)); print(c[0], len(c) - 1)')
(( REST >= 1 )) || fail "this check needs 2 CPUs"
expect_rc 0 "plan keeping 1 CPU for the trainer" -- \
  "$GM" plan --profile "$P" --cluster "$T/local-cluster.json" --trainer-cpus 1 --cpus-per-worker 1 \
  --target-rate 100 -o "$T/plan-kept.json" --no-db
expect_rc 0 "run --plan keeping 1 CPU exits 0" -- timeout 60 \
  "$GM" run --plan "$T/plan-kept.json" -- "${TRAINER[@]}" "$T/kept-trainer.json" 1
expect_in "$T/err" "run: the plan keeps 1 CPU(s) for the trainer: --trainer-cpus $FIRST" \
  "run --plan takes the trainer's CPUs from the plan"
expect_in "$T/err" "run: the trainer on CPU(s) $FIRST, workers started here on CPU(s)" \
  "run --plan pins the trainer and the workers apart"
expect_rc 0 "run --plan --trainer-cpus none exits 0" -- timeout 60 \
  "$GM" run --plan "$T/plan-kept.json" --trainer-cpus none -- "${TRAINER[@]}" "$T/kept-trainer.json" 1
grep -q "the trainer on CPU" "$T/err" && fail "--trainer-cpus none still pinned"
ok "--trainer-cpus none: no pinning"

done_suite
