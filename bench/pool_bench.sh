#!/usr/bin/env bash
# Benchmark: three input-bound jobs submitted together to the suite's Slurm cluster
# (tests/e2e/slurm_cluster.sh: cpu1, cpu2, gpu1, gpu2, a scavenger partition on
# cpu2), their completion times with a fixed CPU split against the same CPUs
# shared through `goldminer pool`, side by side in one run.
#
#   job X: a trainer that takes 120 samples/s (a 1/12 s step per batch of 10)
#   job Y, Z: trainers that take 20 samples/s
#   every worker makes 20 samples/s (a 50 ms sleep per sample in a Python
#   dataset: a worker is a unit of capacity, whatever this machine's speed, and
#   uses little CPU, so that 9 of them fit on this machine's 2 cores)
#
#   fixed: each job holds 3 workers in its own allocation (9 worker CPUs in all);
#   pool:  each job holds 1 worker of its own and reports to a pool that divides
#          6 CPUs of the scavenger partition (9 in all), elastic worker jobs.
#
# Completion time: from the three submissions to each job's COMPLETED (polled
# every 0.2 s). Medians over --repeat rounds; the ratio of mean completion times.
#
# --simulate: then replays the same jobs with `goldminer simulate`, from their
# own profiles (goldminer profile of each job's pipeline and trainer) and the
# bench's shape, and prints each job's predicted completion time beside the
# measured median; with --tolerance F, exits 1 when one is off by more than F.
#
# usage: bench/pool_bench.sh [--build build] [--repeat 3] [--samples-x 7200]
#                            [--samples-yz 1200] [--epoch 1200] [--simulate]
#                            [--tolerance 0.15]
# GM_BENCH_KEEP=DIR keeps the work folder (job outputs, the pool's log) as DIR.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$ROOT/build
REPEAT=3
EPOCH=1200
SAMPLES_X=7200
SAMPLES_YZ=1200
SIMULATE=0
TOLERANCE=0
while (($#)); do
  case $1 in
    --build) BUILD=$(cd "$2" && pwd); shift 2 ;;
    --repeat) REPEAT=$2; shift 2 ;;
    --samples-x) SAMPLES_X=$2; shift 2 ;;
    --samples-yz) SAMPLES_YZ=$2; shift 2 ;;
    --epoch) EPOCH=$2; shift 2 ;;
    --simulate) SIMULATE=1; shift ;;
    --tolerance) TOLERANCE=$2; SIMULATE=1; shift 2 ;;
    -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
    *) echo "pool_bench: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
((SAMPLES_X % EPOCH == 0 && SAMPLES_YZ % EPOCH == 0 && SAMPLES_YZ >= EPOCH)) ||
  { echo "pool_bench: --samples-x and --samples-yz must be whole epochs of $EPOCH (--epoch)" >&2; exit 2; }
GM=$BUILD/cmd/goldminer
PY=/usr/bin/python3
[[ -x $GM ]] || { echo "pool_bench: $GM is missing: build first (bash scripts/build.sh)" >&2; exit 1; }
export PYTHONPATH=$ROOT/python
T=$(mktemp -d /tmp/goldminer-pool-bench-XXXXXX)
source "$ROOT/tests/e2e/slurm_cluster.sh"
pool_pid=""
cleanup() {
  [[ -n $pool_pid ]] && kill "$pool_pid" 2>/dev/null
  [[ -n ${GM_BENCH_KEEP:-} ]] && cp -r "$T" "$GM_BENCH_KEEP"
  slurm_cluster_stop
  rm -rf "$T"
}
trap cleanup EXIT
slurm_cluster_start "$T/cluster" >/dev/null || { echo "pool_bench: the Slurm cluster did not start" >&2; exit 1; }

# The pipeline: epochs of $EPOCH samples of 50 ms each, batches of 10, splits of 20
# (1 s of one worker). Epochs end at a barrier (the next starts when the trainer
# has taken the last batch of this one), so an epoch of few splits would leave
# workers idle at its end and the rate would grow in steps with the worker count.
cat >"$T/sleepy.py" <<PY
import time

import numpy as np


class Sleepy:
    def __len__(self):
        return $EPOCH

    def __getitem__(self, i):
        time.sleep(0.05)
        return np.array([i], dtype=np.float32), i % 10


def make():
    return Sleepy()
PY
cat >"$T/pipeline.json" <<JSON
{ "version": 1, "source": {"type": "range", "count": $EPOCH},
  "stages": [{"op": "exec", "cmd": ["$PY", "-m", "goldminer.dataset_stage", "sleepy:make"],
              "processes": 1}],
  "batch": {"size": 10}, "seed": 1 }
JSON

# job MODE NAME WHERE SAMPLES STEP_S: submits one job; prints its id.
job() {
  local mode=$1 name=$2 where=$3 samples=$4 step=$5 run cpus
  if [[ $mode == fixed ]]; then
    cpus=4
    run="--workers 3"
  else
    cpus=2
    run="--workers 1 --autoscale on --min-workers 1 --max-workers 1 --scale-period 3 \
      --sample-interval 0.5 --elastic-partition scavenger --elastic-max 6 --elastic-cpus 1 \
      --pool $pool --pool-key-file $T/pool.key"
  fi
  cat >"$T/$name.sbatch" <<SCRIPT
#!/bin/bash
#SBATCH $where --nodes=1 --ntasks=1 --cpus-per-task=$cpus
exec "$GM" run --pipeline "$T/pipeline.json" $run --samples-per-split 20 --no-db \
  --name $name -- $PY "$ROOT/bench/plan_trainer.py" --epochs $((samples / EPOCH)) --step-s $step
SCRIPT
  local id
  id=$(sbatch --parsable --chdir="$T" --output="$T/$name.out" --export=ALL "$T/$name.sbatch") || return 1
  echo "${id%%;*}"
}

# round MODE: the three jobs together; prints "X Y Z" completion seconds.
round() {
  local mode=$1 start ids=() names=(x y z) i state now
  start=$(date +%s.%N)
  ids+=("$(job "$mode" "x-$mode" "--partition=cpu --nodelist=cpu1" "$SAMPLES_X" 0.0833)")
  ids+=("$(job "$mode" "y-$mode" "--partition=cpu --nodelist=cpu1" "$SAMPLES_YZ" 0.5)")
  ids+=("$(job "$mode" "z-$mode" "--partition=gpu --nodelist=gpu1" "$SAMPLES_YZ" 0.5)")
  local left=3 secs=(0 0 0)
  for ((k = 0; k < 3000 && left > 0; k++)); do
    for i in 0 1 2; do
      [[ ${secs[$i]} != 0 ]] && continue
      state=$(scontrol show job "${ids[$i]}" -o 2>/dev/null | grep -oE "JobState=[A-Z]+")
      case $state in
        JobState=COMPLETED)
          now=$(date +%s.%N)
          secs[i]=$(awk -v a="$now" -v b="$start" 'BEGIN {printf "%.3f", a - b}')
          left=$((left - 1)) ;;
        JobState=FAILED|JobState=CANCELLED|JobState=TIMEOUT)
          echo "pool_bench: job ${names[$i]}-$mode ended $state:" >&2
          cat "$T/${names[$i]}-$mode.out" >&2
          return 1 ;;
      esac
    done
    sleep 0.2
  done
  ((left == 0)) || { echo "pool_bench: the $mode jobs did not finish in 600 s" >&2; return 1; }
  echo "${secs[*]}"
}

"$GM" pool --listen 127.0.0.1:0 --cpus 6 --min-lifetime 10 --key-file "$T/pool.key" \
  >"$T/pool.out" 2>"$T/pool.err" &
pool_pid=$!
for _ in $(seq 1 100); do pool=$(head -n 1 "$T/pool.out" 2>/dev/null); [[ -n $pool ]] && break; sleep 0.1; done
[[ -n ${pool:-} ]] || { echo "pool_bench: the pool printed no address" >&2; cat "$T/pool.err" >&2; exit 1; }

echo "pool_bench: 3 jobs (X: $SAMPLES_X samples for a 120/s trainer; Y, Z: $SAMPLES_YZ for 20/s),"
echo "  workers of 20 samples/s; fixed: 3 workers each; pool: 1 each + 6 CPUs shared; $REPEAT round(s)"
: >"$T/results"
for ((r = 1; r <= REPEAT; r++)); do
  for mode in fixed pool; do
    times=$(round "$mode") || exit 1
    echo "$mode $times" >>"$T/results"
    echo "  round $r $mode: completion X Y Z = $times s"
    for n in x y z; do  # the trainers' own figures (bench/plan_trainer.py's last line)
      echo "    $n: $(grep -h '"samples_per_s"' "$T/$n-$mode.out" | tail -n 1)"
    done
    mkdir -p "$T/round$r" && cp "$T"/*-"$mode".out "$T/round$r/"  # kept with GM_BENCH_KEEP
  done
done
$PY - "$T/results" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    mode, *secs = line.split()
    rows.setdefault(mode, []).append([float(s) for s in secs])
med = {m: [statistics.median(r[i] for r in rs) for i in range(3)] for m, rs in rows.items()}
mean = {m: sum(v) / 3 for m, v in med.items()}
print("median completion time (s)      X       Y       Z    mean")
for m in ("fixed", "pool"):
    print(f"  {m:<28} {med[m][0]:6.1f}  {med[m][1]:6.1f}  {med[m][2]:6.1f}  {mean[m]:6.1f}")
print(f"mean completion time, fixed / pool: {mean['fixed'] / mean['pool']:.2f}x;"
      f" job X alone: {med['fixed'][0] / med['pool'][0]:.2f}x")
PY
echo "pool: $(grep -c "may hold" "$T/pool.err") grant change(s); the last of each run:"
for n in x y z; do grep "run $n-pool may hold" "$T/pool.err" | tail -n 1 | sed 's/^/  /'; done

# --simulate: the same jobs replayed by `goldminer simulate` from their own
# profiles, and the predicted completion times beside the measured ones.
((SIMULATE)) || exit 0
echo "simulate: profiling job X's and Y/Z's pipeline and trainer (goldminer profile, beside each other)"
mkdir -p "$T/profiles"
profile() {  # profile NAME STEP_S
  "$GM" -q profile --pipeline "$T/pipeline.json" --samples 40 --warmup 10 --steps 30 \
    --samples-per-split 20 --no-db -o "$T/profiles/$1.json" -- \
    $PY "$ROOT/bench/plan_trainer.py" --epochs 1000 --step-s "$2" >"$T/profile-$1.out" 2>&1
}
profile x 0.0833 &
px=$!
profile yz 0.5 || { cat "$T/profile-yz.out" >&2; exit 1; }
wait "$px" || { cat "$T/profile-x.out" >&2; exit 1; }
# The model's shape of each mode: trainers hold no CPU in it (--trainer-cpus-per-gpu
# 0), so a task asks its data workers' CPUs, and a node has the worker CPUs the
# bench lets the jobs there use: fixed, 3 for each job on its node; pool, each
# job's own worker on its node and the pool's 6 on cpu2. One "GPU" is a trainer.
printf 'name,cpus,memory_mib,gpus\ncpu1,6,0,2\ngpu1,3,0,1\n' >"$T/fixed-nodes.csv"
printf 'name,cpus,memory_mib,gpus\ncpu1,2,0,2\ngpu1,1,0,1\ncpu2,6,0,0\n' >"$T/pool-nodes.csv"
for mode in fixed pool; do
  cpus=$([[ $mode == fixed ]] && echo 3 || echo 1)
  { echo "submit_s,duration_s,gpus,cpus,class,samples"
    echo "0,,1,$cpus,x,$SAMPLES_X"
    echo "0,,1,$cpus,yz,$SAMPLES_YZ"
    echo "0,,1,$cpus,yz,$SAMPLES_YZ"; } >"$T/$mode-trace.csv"
done
# Start-up: a job's first batch comes START_S after its submission (Slurm starts
# it, goldminer run starts its workers, their interpreters load the dataset).
# Worker delay: the run's autoscaler first decides after its first data and three
# scale periods (goldminer-run(1), AUTOSCALING), and an elastic worker job then
# starts the same way: what the pool grants is in use that long after the start.
START_S=3
DELAY_S=$((START_S + 3 * 3 + START_S))
common=(--profiles "$T/profiles" --trainer-cpus-per-gpu 0 --task-start "$START_S")
"$GM" -q simulate --trace "$T/fixed-trace.csv" --nodes "$T/fixed-nodes.csv" --policy static \
  "${common[@]}" -o "$T/fixed-sim.json" --tasks "$T/fixed-tasks.csv" >/dev/null || exit 1
"$GM" -q simulate --trace "$T/pool-trace.csv" --nodes "$T/pool-nodes.csv" --policy cluster \
  "${common[@]}" --worker-delay "$DELAY_S" --min-worker-lifetime 10 \
  -o "$T/pool-sim.json" --tasks "$T/pool-tasks.csv" >/dev/null || exit 1
$PY - "$T/results" "$T/fixed-tasks.csv" "$T/pool-tasks.csv" "$TOLERANCE" <<'PY'
import csv, statistics, sys
results, fixed_csv, pool_csv, tolerance = sys.argv[1:5]
rows = {}
for line in open(results):
    mode, *secs = line.split()
    rows.setdefault(mode, []).append([float(s) for s in secs])
measured = {m: [statistics.median(r[i] for r in rs) for i in range(3)] for m, rs in rows.items()}
predicted = {}
for mode, path in (("fixed", fixed_csv), ("pool", pool_csv)):
    predicted[mode] = [float(r["jct_s"]) for r in csv.DictReader(open(path))]
print("simulate (from the jobs' profiles) against the measured medians, completion s")
print("  mode   job   measured  predicted  predicted/measured")
worst = 0.0
for mode in ("fixed", "pool"):
    for i, name in enumerate("XYZ"):
        m, p = measured[mode][i], predicted[mode][i]
        worst = max(worst, abs(p / m - 1))
        print(f"  {mode:<6} {name}   {m:8.1f}  {p:9.1f}  {p / m:18.2f}")
print(f"simulate: the largest miss is {worst:.0%}")
if float(tolerance) > 0 and worst > float(tolerance):
    print(f"simulate: beyond the tolerance of {float(tolerance):.0%}", file=sys.stderr)
    sys.exit(1)
PY
