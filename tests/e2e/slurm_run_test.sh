#!/usr/bin/env bash
# End-to-end: `goldminer run` under Slurm, on a real cluster this suite starts and
# stops (tests/e2e/slurm_cluster.sh: slurmctld, nodes gpu1 gpu2 with fake GPUs and
# cpu1 cpu2, each slurmd in a UTS namespace of its own, so `hostname` differs).
# `plan --slurm --sbatch` writes a heterogeneous job; sbatch runs it; inside it,
# `run --plan` (backend auto -> slurm) starts every worker as its own job step
# (srun --exact, in component 0 or 1 as planned) and the trainer beside it. Each
# node is in a network namespace of its own, joined to the others by veth pairs on
# a bridge (SLURM_CLUSTER_NETNS=1): the node names resolve nowhere, so workers on
# cpu1 reach the coordinator on gpu1 at gpu1's own address, over the bridge, as on
# a real cluster; loopback would not work. One worker step is cancelled mid-epoch with
# scancel: it is replaced, every sample still arrives exactly once, the job
# COMPLETES, and the run's record names the job, its backend and every worker.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/slurm_cluster.sh"
GM=$(cd "$(dirname "$GM")" && pwd)/$(basename "$GM")
trap 'slurm_cluster_stop; rm -rf "$T"' EXIT
cd "$T"
command -v sqlite3 >/dev/null || fail "sqlite3 is missing: run scripts/install-deps.sh"
SLURM_CLUSTER_NETNS=1
slurm_cluster_start "$T/cluster" >/dev/null || fail "the Slurm cluster did not start"
subnet=$(sed -n 's/^SlurmctldHost=.*(\(.*\)\.1)$/\1/p' "$SLURM_CONF")
[[ -n $subnet ]] || fail "no cluster subnet in $SLURM_CONF"
ok "a Slurm cluster of 4 nodes is up, each node in its own network namespace ($subnet.0/24)"

photo_corpus "$T/corpus"
small_pipeline "$T/pipeline.json"
# A profile: 10 ms of CPU per sample, 4 threads at 80% efficiency, a trainer that
# could take 1500 samples/s: more than gpu1 alone can feed.
cat >"$T/profile.json" <<JSON
{"schema": "goldminer.profile", "version": 1, "created_utc": "2026-11-30T06:00:00Z",
 "host": "dev", "cores": 4, "verdict": "input-bound", "input_bound_fraction": 0.8,
 "pipeline": {"path": "$T/pipeline.json", "batch_size": 4, "samples": 100,
   "cpu_s_per_sample": 0.01, "samples_per_s_per_core": 100, "peak_rss_bytes": 104857600,
   "runs": [{"threads": 1, "samples": 100, "seconds": 1.25, "samples_per_s": 80.0},
            {"threads": 4, "samples": 400, "seconds": 1.25, "samples_per_s": 320.0}],
   "stages": [{"index": 0, "name": "decode", "cpu_s_per_sample": 0.01,
               "bytes_in_per_sample": 20000, "bytes_out_per_sample": 3072}]},
 "trainer": {"command": ["/bin/true"], "steps": 10, "seconds": 1, "samples_per_s": 100,
   "batch_size": 4, "step_s_median": 0.01, "wait_s_median": 0.008,
   "compute_s_median": 0.002667, "demand_samples_per_s": 1500, "stall_fraction": 0.8,
   "gpu": {"available": false}, "step_list": []}}
JSON

# 1. The plan: 6 of gpu1's 8 CPUs kept for the trainer leave one 2-CPU worker there;
#    two more 2-CPU workers go to the cpu partition (at most 3 workers).
expect_rc 0 "plan --slurm writes a heterogeneous job" -- "$GM" plan --slurm --profile "$T/profile.json" \
  --trainer-cpus 6 --cpus-per-worker 2 --max-workers 3 --no-db -o "$T/plan.json" \
  --sbatch "$T/job.sbatch" -- $PY "$SRC/tests/e2e/trainer.py" "$T/trained.json" 2
$PY - "$T/plan.json" <<'PY' || fail "the plan is not the one expected: $(cat "$T/plan.json")"
import json, sys
p = json.load(open(sys.argv[1]))
w = [(x["node"], x["cpus"], x["on_trainer_node"]) for x in p["workers"]]
assert w == [("gpu1", 2, True), ("cpu1", 2, False), ("cpu1", 2, False)], w
assert p["prediction"]["limit"] == "max-workers", p["prediction"]
PY
ok "the plan: one worker on gpu1, two on cpu1"
expect_in "$T/job.sbatch" "#SBATCH hetjob" "the job script is heterogeneous"

# 2. Run it: each batch takes the trainer 0.25 s, long enough to see the steps.
job=$(GM_TEST_STEP_S=0.25 GM_TEST_GOLDMINER=$GM sbatch --parsable --chdir="$T" \
  --output="$T/job.out" --export=ALL "$T/job.sbatch") || fail "sbatch refused the job"
job=${job%%;*}
ok "submitted job $job"
steps=""
cancelled=""
for _ in $(seq 1 300); do
  state=$(scontrol show job "$job" -o 2>/dev/null | head -n 1)
  [[ $state == *"JobState=RUNNING"* || $state == *"JobState=PENDING"* || $state == *"JobState=CONFIGURING"* ]] || break
  # A heterogeneous job's components are jobs of their own: component 0 is $job,
  # component 1 the next id; a step is JOBID.STEP.
  now=$(squeue -s -h -o "%i %j" 2>/dev/null | awk '$2 == "goldminer-worker" {print $1}' | sort)
  [[ $(wc -w <<<"$now") -gt $(wc -w <<<"$steps") ]] && steps=$now
  # Cancel a component-1 step once every worker has registered (its row in runs.db
  # names its step): mid-epoch, and known to the record.
  placed=$(sqlite3 "$T/runs.db" "SELECT step_id FROM workers WHERE step_id IS NOT NULL" 2>/dev/null | sort)
  if [[ -z $cancelled && $(wc -w <<<"$now") -ge 3 && $(wc -w <<<"$placed") -ge 3 ]]; then
    cancelled=$(grep -m1 -v "^$job\." <<<"$placed" || true)
    [[ -n $cancelled ]] && scancel "$cancelled"
  fi
  sleep 0.1
done
[[ $(wc -w <<<"$steps") -ge 3 ]] || fail "fewer than 3 worker steps seen: '$steps'; $(cat "$T/job.out")"
grep -q "^$job\." <<<"$steps" && grep -q -v "^$job\." <<<"$steps" ||
  fail "the worker steps are not in both components: $steps"
ok "3 worker steps ran at once, in components 0 and 1: $(tr '\n' ' ' <<<"$steps")"
[[ -n $cancelled ]] || fail "no worker step in component 1 to cancel"
ok "cancelled worker step $cancelled mid-epoch"
slurm_job_completes "$job" "$T/job.out" 20 || fail "job $job did not complete"
ok "the job COMPLETED with exit code 0:0"
$PY - "$T/trained.json" <<'PY' || fail "samples lost or repeated: $(cat "$T/job.out")"
import json, sys
j = json.load(open(sys.argv[1]))
assert len(j["epochs"]) == 2, len(j["epochs"])
for keys in j["epochs"]:
    assert len(keys) == 36 and len(set(keys)) == 36, (len(keys), len(set(keys)))
PY
ok "every sample of both epochs arrived exactly once"
expect_in "$T/job.out" "starting another" "the run replaced the cancelled worker"
# The coordinator's address in the log is not loopback.
addr=$(grep -o 'coordinator at [^,]*' "$T/job.out" | head -n 1)
[[ $addr == "coordinator at $subnet.11:"* ]] || fail "the coordinator was at '$addr', not gpu1's $subnet.11"
ok "workers on cpu1 reached the coordinator on gpu1 over the bridge ($addr)"

# 3. The record.
DB=$T/runs.db
[[ $(sqlite3 "$DB" "SELECT backend || ' ' || job_id || ' ' || status || ' ' || exit_code FROM runs") == "slurm $job succeeded 0" ]] ||
  fail "runs: $(sqlite3 "$DB" 'SELECT * FROM runs')"
ok "runs.db: backend slurm, job $job, succeeded"
[[ $(sqlite3 "$DB" "SELECT count(*) FROM workers") -ge 4 ]] ||
  fail "workers: $(sqlite3 "$DB" 'SELECT * FROM workers')"
ok "runs.db: the 3 workers and the replacement"
# Each worker's row says where it ran: its node and its step (JOB.STEP, in the
# component the plan put it in), as the worker told the coordinator.
places=$(sqlite3 "$DB" "SELECT w.host || ' ' || ifnull(w.step_id, '-') FROM workers w JOIN runs r ON w.run_id = r.id WHERE r.job_id = '$job'")
while read -r host step; do
  [[ ($host == gpu1 || $host == cpu1) && $step =~ ^($job|$((job + 1)))\.[0-9]+$ ]] ||
    fail "a worker row places it at '$host' '$step': $places"
done <<<"$places"
grep -q "^gpu1 $job\." <<<"$places" && grep -q "^cpu1 $((job + 1))\." <<<"$places" ||
  fail "the workers are not recorded on gpu1 (component 0, job $job) and cpu1 (component 1, job $((job + 1))): $places"
grep -q "^cpu1 ${cancelled//./\\.}$" <<<"$places" || fail "the cancelled step $cancelled is not in the record: $places"
ok "runs.db: each worker's node and step ($(tr '\n' ',' <<<"$places"))"
[[ $(squeue -s -h -o "%i %j" | grep -c goldminer-worker) == 0 ]] ||
  fail "steps left: $(squeue -s -h)"
ok "no step of the job is left"
# 4. Scaling under Slurm: workers added as steps while the trainer waits, and a step
#    drained (not replaced) when the trainer is the bottleneck. The pipeline's cost
#    is a 10 ms sleep per sample in a Python dataset, so the figures do not depend on
#    this machine's speed.
slow_pipeline "$T/slow.json"
scaled_job() {  # scaled_job NAME WORKERS EPOCHS STEP_S PERIOD_S: runs an autoscaled job, waits
  cat >"$T/$1.sbatch" <<SCRIPT
#!/bin/bash
#SBATCH --partition=gpu --nodes=1 --ntasks=1 --cpus-per-task=6 --gres=gpu:1 --mem=4000M
exec "$GM" run --pipeline "$T/slow.json" --workers $2 --autoscale on --min-workers 1 \
  --max-workers 3 --scale-period $5 --sample-interval 0.25 --samples-per-split 40 \
  --db "$T/runs.db" --name $1 -- $PY "$SRC/tests/e2e/trainer.py" "$T/$1.json" $3
SCRIPT
  local id
  id=$(GM_TEST_STEP_S=$4 sbatch --parsable --chdir="$T" --output="$T/$1.out" --export=ALL \
    "$T/$1.sbatch") || fail "sbatch refused $1"
  id=${id%%;*}
  slurm_job_completes "$id" "$T/$1.out" || fail "job $1 did not complete"
}
scaled_job up 1 4 0 1
[[ $(sqlite3 "$DB" "SELECT count(*) FROM events WHERE run_id = 'up' AND message LIKE '1 -> _ workers: data wait %above 10%'") -ge 1 ]] ||
  fail "no step added: $(sqlite3 "$DB" "SELECT message FROM events WHERE run_id = 'up'")"
ok "an autoscaled job added a worker step while the trainer waited"
quiet_output "$T/up.out" "the autoscaled GPU job"
$PY - "$T/up.json" <<'PY' || fail "samples lost or repeated while scaling up"
import json, sys
for keys in json.load(open(sys.argv[1]))["epochs"]:
    assert len(keys) == 400 and len(set(keys)) == 400, (len(keys), len(set(keys)))
PY
ok "every sample of the 4 epochs arrived exactly once"
# A smoke case of the real edge (a step drained with SIGTERM through scancel, not
# replaced); the autoscaler's rules themselves are unit-tested on a fake clock
# (tests/unit/run_loop_test.cc), so nothing here depends on how fast this machine
# is beyond a 3x margin: the trainer takes 33 samples/s, one worker makes 100.
scaled_job down 2 3 0.3 5
[[ $(sqlite3 "$DB" "SELECT count(*) FROM workers WHERE run_id = 'down' AND exit LIKE 'drained: %'") -ge 1 ]] ||
  fail "no step drained: $(sqlite3 "$DB" "SELECT * FROM workers WHERE run_id = 'down'"; sqlite3 "$DB" "SELECT message FROM events WHERE run_id = 'down'")"
[[ $(sqlite3 "$DB" "SELECT count(*) FROM events WHERE run_id = 'down' AND message LIKE '%starting another%'") == 0 ]] ||
  fail "a drained step was replaced: $(sqlite3 "$DB" "SELECT message FROM events WHERE run_id = 'down'")"
ok "a trainer-bound job drained a worker step and did not replace it"
quiet_output "$T/down.out" "the GPU job that drained a step"
$PY - "$T/down.json" <<'PY' || fail "samples lost or repeated while draining"
import json, sys
epochs = json.load(open(sys.argv[1]))["epochs"]
assert len(epochs) == 3, len(epochs)
for keys in epochs:
    assert len(keys) == 400 and len(set(keys)) == 400, (len(keys), len(set(keys)))
PY
ok "every sample arrived exactly once"

# 5. Requeue: the job is requeued mid-epoch (as preemption with requeue, or a time
#    limit with --requeue, does). The trainer checkpoints its loader state with each
#    batch; the second attempt is a new `goldminer run` (new coordinator, new worker
#    steps) whose trainer continues from the checkpoint. Together the two attempts
#    deliver exactly what one uninterrupted run delivers, batch for batch.
wait_job() {  # wait_job ID: until the job has left the queue's running states
  for _ in $(seq 1 900); do
    state=$(scontrol show job "$1" -o 2>/dev/null | head -n 1)
    [[ -z $state || $state == *"JobState=COMPLETED"* || $state == *"JobState=FAILED"* ||
       $state == *"JobState=CANCELLED"* ]] && return 0
    sleep 0.2
  done
  return 1
}
"$GM" run --backend local --pipeline "$T/pipeline.json" --workers 2 --samples-per-split 8 --no-db \
  -- $PY "$SRC/tests/e2e/trainer.py" "$T/uninterrupted.json" 2 >/dev/null 2>"$T/uninterrupted.err" ||
  { cat "$T/uninterrupted.err" >&2; fail "the uninterrupted reference run"; }
cat >"$T/requeue.sbatch" <<SCRIPT
#!/bin/bash
#SBATCH --partition=cpu --nodes=1 --ntasks=1 --cpus-per-task=4 --requeue --open-mode=append
exec "$GM" run --pipeline "$T/pipeline.json" --workers 2 --samples-per-split 8 \
  --db "$T/runs.db" -- $PY "$SRC/tests/e2e/trainer.py" "$T/requeued.json" 2
SCRIPT
job=$(GM_TEST_STEP_S=0.2 GM_TEST_STATE="$T/requeue.ckpt" GM_TEST_CHECKPOINT=1 \
  sbatch --parsable --chdir="$T" --output="$T/requeue.out" --export=ALL "$T/requeue.sbatch") ||
  fail "sbatch refused the requeue job"
job=${job%%;*}
position=0
for _ in $(seq 1 300); do
  [[ -f $T/requeue.ckpt ]] &&
    position=$($PY -c "import json; print(json.load(open('$T/requeue.ckpt'))['loader']['position'])" 2>/dev/null || echo 0)
  [[ $position -ge 4 ]] && break
  sleep 0.1
done
[[ $position -ge 4 ]] || { cat "$T/requeue.out" >&2; fail "the trainer of job $job saved no checkpoint"; }
scontrol requeue "$job" || fail "scontrol requeue $job"
ok "job $job requeued mid-epoch (checkpoint at batch $position)"
# A requeued job waits for a begin time; let it start now.
for _ in $(seq 1 100); do
  scontrol update jobid="$job" StartTime=now 2>/dev/null && break
  sleep 0.2
done
wait_job "$job" || fail "job $job did not end"
[[ $state == *"JobState=COMPLETED"* && $state == *"ExitCode=0:0"* && $state == *"Restarts=1"* ]] ||
  { cat "$T/requeue.out" >&2; fail "job $job: $(grep -o 'JobState=[A-Z]* .*Restarts=[0-9]*' <<<"$state")"; }
ok "the requeued job ran again and COMPLETED"
$PY - "$T/uninterrupted.json" "$T/requeued.json" <<'CHECK' || fail "the two attempts differ from one uninterrupted run"
import json, sys
want, got = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
for field in ("epochs", "labels", "batches"):
    assert want[field] == got[field], (field, [len(x) for x in want[field]], [len(x) for x in got[field]])
assert [len(e) for e in got["epochs"]] == [36, 36]
CHECK
ok "the two attempts together delivered exactly the uninterrupted run's batches"
rows=$(sqlite3 "$DB" "SELECT status || ' ' || exit_code FROM runs WHERE job_id = '$job' ORDER BY started_utc, rowid")
[[ $(head -n 1 <<<"$rows") == "preempted "* && $(tail -n 1 <<<"$rows") == "succeeded 0" ]] ||
  fail "runs of job $job: $rows"
ok "runs.db: the first attempt preempted, the second succeeded ($(tr '\n' ',' <<<"$rows"))"
[[ $(sqlite3 "$DB" "SELECT count(*) FROM events e JOIN runs r ON e.run_id = r.id WHERE r.job_id = '$job' AND e.message LIKE '%preempted (requeued)%'") -ge 1 ]] ||
  fail "no preemption event: $(sqlite3 "$DB" "SELECT e.message FROM events e JOIN runs r ON e.run_id = r.id WHERE r.job_id = '$job'")"
ok "the record says why: the job was requeued"

# 6. scancel of the whole job mid-run: the record is consistent (cancelled, every
#    worker ended) and nothing is left: no step, no worker or trainer process.
job=$(GM_TEST_STEP_S=0.3 sbatch --parsable --chdir="$T" --output="$T/cancel.out" --export=ALL \
  --partition=cpu --nodes=1 --ntasks=1 --cpus-per-task=4 \
  --wrap="exec '$GM' run --pipeline '$T/pipeline.json' --workers 2 --samples-per-split 8 --db '$T/runs.db' --name cancelled -- $PY '$SRC/tests/e2e/trainer.py' '$T/cancelled.json' 2") ||
  fail "sbatch refused the job to cancel"
job=${job%%;*}
for _ in $(seq 1 300); do
  [[ $(squeue -s -h -j "$job" -o "%j" 2>/dev/null | grep -c goldminer-worker) -ge 2 ]] && break
  sleep 0.1
done
sleep 1
scancel "$job" || fail "scancel $job"
wait_job "$job" || fail "job $job did not end after scancel"
for _ in $(seq 1 50); do  # the batch step may still be writing the record
  [[ $(sqlite3 "$DB" "SELECT status FROM runs WHERE id = 'cancelled'") != running ]] && break
  sleep 0.2
done
[[ $(sqlite3 "$DB" "SELECT status || ' ' || job_id FROM runs WHERE id = 'cancelled'") == "cancelled $job" ]] ||
  fail "the cancelled run: $(sqlite3 "$DB" "SELECT * FROM runs WHERE id = 'cancelled'"); $(cat "$T/cancel.out")"
[[ $(sqlite3 "$DB" "SELECT count(*) FROM workers WHERE run_id = 'cancelled'") -ge 2 &&
   $(sqlite3 "$DB" "SELECT count(*) FROM workers WHERE run_id = 'cancelled' AND ended_utc IS NULL") == 0 ]] ||
  fail "workers of the cancelled run: $(sqlite3 "$DB" "SELECT * FROM workers WHERE run_id = 'cancelled'")"
ok "scancel of the whole job: recorded as cancelled, every worker's end recorded"
sleep 1
[[ $(squeue -s -h -o "%i %j" | grep -c goldminer-worker) == 0 ]] || fail "steps left: $(squeue -s -h)"
left=$(suite_pgrep "cancelled.json|goldminer worker --coordinator")
[[ -z $left ]] || fail "processes left: $left"
ok "no step and no worker or trainer process is left"

# 7. Bad input: a run asking for more workers than its allocation holds is refused
#    before any step waits for CPUs, and the attempt is recorded.
job=$(sbatch --parsable --chdir="$T" --output="$T/toobig.out" --partition=cpu --nodes=1 \
  --ntasks=1 --cpus-per-task=2 --export=ALL \
  --wrap="'$GM' run --pipeline '$T/pipeline.json' --workers 3 --threads-per-worker 2 --db '$T/runs.db' --name toobig -- $PY '$SRC/tests/e2e/trainer.py' '$T/toobig.json' 1") ||
  fail "sbatch refused the oversized job"
job=${job%%;*}
wait_job "$job" || fail "the oversized job did not end"
[[ $state == *"JobState=FAILED"* && $state == *"ExitCode=1:0"* ]] ||
  fail "the oversized job: $(grep -o 'JobState=[A-Z]* .*ExitCode=[0-9:]*' <<<"$state"); $(cat "$T/toobig.out")"
expect_in "$T/toobig.out" "3 worker(s) of 6 CPUs in all do not fit in job $job (SLURM_JOB_CPUS_PER_NODE=2, SLURM_MEM_PER_CPU=1000), which holds 2 CPUs" \
  "workers beyond the allocation: refused, naming what is needed and what there is"
[[ $(sqlite3 "$DB" "SELECT status || ' ' || job_id FROM runs WHERE id = 'toobig'") == "failed $job" ]] ||
  fail "the refused run is not recorded: $(sqlite3 "$DB" "SELECT * FROM runs WHERE id = 'toobig'")"
ok "the refused run is recorded as failed, with its job id"

# 8. An unchanged PyTorch program, no pipeline file: its DataLoader's 2 workers run
#    as virtual workers under the worker steps, and give stock PyTorch's batches.
cp "$SRC/tests/e2e/where_made.py" "$T/"
cat >"$T/loader.py" <<'PY'
import hashlib, json, os, sys
import torch
from torch.utils.data import DataLoader, Dataset
from where_made import made_by

class Where(Dataset):
    def __len__(self):
        return 8
    def __getitem__(self, i):
        return torch.rand(2) + i, made_by()

generator = torch.Generator()
generator.manual_seed(3)
batches = list(DataLoader(Where(), batch_size=2, shuffle=True, num_workers=2, generator=generator))
json.dump({"digests": [hashlib.sha256(x.numpy().tobytes()).hexdigest() for x, _ in batches],
           "parents": sorted({p for _, where in batches for p in where})}, open(sys.argv[1], "w"))
PY
PYTHONPATH= $PY "$T/loader.py" "$T/loader.stock.json" || fail "the program fails stock"
job=$(sbatch --parsable --chdir="$T" --output="$T/offload.out" --partition=gpu --nodes=1 \
  --ntasks=1 --cpus-per-task=4 --gres=gpu:1 --mem=3000M --export=ALL \
  --wrap="'$GM' run --workers 2 --db '$T/runs.db' --name offload -- $PY '$T/loader.py' '$T/loader.served.json'") ||
  fail "sbatch refused the offload job"
job=${job%%;*}
wait_job "$job" || fail "the offload job did not end"
[[ $state == *"JobState=COMPLETED"* && $state == *"ExitCode=0:0"* ]] ||
  fail "the offload job: $(grep -o 'JobState=[A-Z]* .*ExitCode=[0-9:]*' <<<"$state"); $(cat "$T/offload.out")"
$PY - "$T/loader.stock.json" "$T/loader.served.json" <<'PY' || fail "the offloaded batches: $(cat "$T/offload.out")"
import json, sys
stock, served = (json.load(open(f)) for f in sys.argv[1:3])
assert served["digests"] == stock["digests"], "not the stock batches"
assert served["parents"] == ["goldminer worker"], served["parents"]
PY
ok "under Slurm, an unchanged program's DataLoader ran on the worker steps, with the stock batches"
quiet_output "$T/offload.out" "the unchanged program's GPU job"
[[ $(sqlite3 "$DB" "SELECT count(*) FROM events WHERE run_id = 'offload' AND kind = 'offload' AND message LIKE 'rank 0: a DataLoader of Where runs its 2 worker(s) as virtual workers%'") == 1 ]] ||
  fail "the offload is not recorded: $(sqlite3 "$DB" "SELECT kind, message FROM events WHERE run_id = 'offload'")"
ok "runs.db records the DataLoader served"

# 9. A two-node data-parallel trainer, unchanged: the trainer command is srun -N2
#    (gloo on CPU, a DistributedSampler per rank, DDP averaging the gradients); the
#    run starts it once and each of its two tasks, on gpu1 and gpu2 in a GPU job
#    (--gres=gpu:1 --mem a node), gets its GPU and has its DataLoader served by the
#    worker steps, with the batches each rank gets stock.
cat >"$T/ddp.py" <<'PY'
import hashlib, json, os, socket, sys
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset, DistributedSampler
from where_made import made_by

class Where(Dataset):
    def __len__(self):
        return 24
    def __getitem__(self, i):
        return torch.rand(4) + i, made_by()

rank, world = int(os.environ["SLURM_PROCID"]), int(os.environ["SLURM_NTASKS"])
dist.init_process_group("gloo", init_method="file://" + sys.argv[2], rank=rank, world_size=world)
torch.manual_seed(0)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
sampler = DistributedSampler(Where(), num_replicas=world, rank=rank, shuffle=True, seed=7)
generator = torch.Generator()
generator.manual_seed(5)
loader = DataLoader(Where(), batch_size=3, sampler=sampler, num_workers=2, generator=generator)
digests, makers = [], set()
for epoch in range(2):
    sampler.set_epoch(epoch)
    for x, where in loader:
        digests.append(hashlib.sha256(x.numpy().tobytes()).hexdigest())
        makers.update(where)
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()
params = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in model.parameters()))
json.dump({"digests": digests, "makers": sorted(makers), "host": socket.gethostname(),
           "params": params.hexdigest(), "gpus": os.environ.get("CUDA_VISIBLE_DEVICES", "")},
          open(sys.argv[1] % rank, "w"))
dist.destroy_process_group()
PY
ddp_job() {  # NAME COMMAND...: a 2-node GPU job (a GPU a node, --mem); waits for its end
  local name=$1
  shift
  job=$(sbatch --parsable --chdir="$T" --output="$T/$name.out" --partition=gpu --nodes=2 \
    --ntasks-per-node=1 --cpus-per-task=4 --gres=gpu:1 --mem=4000M \
    --export=ALL,GLOO_SOCKET_IFNAME=eth0 --wrap="$*") ||
    fail "sbatch refused the $name job"
  job=${job%%;*}
  wait_job "$job" || fail "the $name job did not end"
  [[ $state == *"JobState=COMPLETED"* && $state == *"ExitCode=0:0"* ]] ||
    fail "the $name job: $(grep -o 'JobState=[A-Z]* .*ExitCode=[0-9:]*' <<<"$state"); $(cat "$T/$name.out")"
}
ranks="srun -N2 --ntasks-per-node=1 --exact -c 1 $PY $T/ddp.py"
ddp_job ddp-stock "PYTHONPATH= $ranks $T/ddp.stock.%d.json $T/ddp.stock.store"
ddp_job ddp-served "'$GM' run --workers 2 --db '$T/runs.db' --name ddp -- $ranks $T/ddp.served.%d.json $T/ddp.served.store"
$PY - "$T" <<'PY' || fail "the two-node trainer's batches: $(cat "$T/ddp-served.out")"
import json, sys
t = sys.argv[1]
stock = [json.load(open(f"{t}/ddp.stock.{r}.json")) for r in (0, 1)]
served = [json.load(open(f"{t}/ddp.served.{r}.json")) for r in (0, 1)]
assert sorted(s["host"] for s in served) == ["gpu1", "gpu2"], [s["host"] for s in served]
# The trainer's step got its node's GPU (fake GPUs: CUDA_VISIBLE_DEVICES=0), though
# worker steps started before it: they ask --gres=none.
assert [s["gpus"] for s in served] == ["0", "0"], [s["gpus"] for s in served]
for r in (0, 1):
    assert len(served[r]["digests"]) == 8, served[r]["digests"]
    assert served[r]["digests"] == stock[r]["digests"], f"rank {r}: not the stock batches"
    assert served[r]["makers"] == ["goldminer worker"], (r, served[r]["makers"])
    assert stock[r]["makers"] != ["goldminer worker"], (r, stock[r]["makers"])
assert served[0]["digests"] != served[1]["digests"], "the ranks got the same batches"
params = {s["params"] for s in stock + served}
assert len(params) == 1, "the ranks' models differ (DDP) or differ from stock's"
PY
ok "srun -N2 trainer in a GPU job: each rank on its own node got its GPU and stock's batches from the worker steps; one model"
quiet_output "$T/ddp-served.out" "the srun trainer's job"
expect_in "$T/ddp-served.out" "the trainer command is srun: its 2 task(s) are the trainer's ranks" \
  "the run counts srun's tasks as its ranks"
for r in 0 1; do
  [[ $(sqlite3 "$DB" "SELECT count(*) FROM events WHERE run_id = 'ddp' AND kind = 'offload' AND message LIKE 'rank $r: a DataLoader of Where runs its 2 worker(s) as virtual workers%'") == 1 ]] ||
    fail "rank $r's offload is not recorded: $(sqlite3 "$DB" "SELECT kind, message FROM events WHERE run_id = 'ddp'")"
done
ok "runs.db records each rank's DataLoader served"

# 10. This cluster's own history (JobCompType=jobcomp/filetxt) replayed by
#    `goldminer simulate` on its nodes (as slurm_cluster.sh declares them: 8 CPUs,
#    16000 MiB): every job that ran above is a task.
JOBCOMP=$T/cluster/log/jobcomp.txt
[[ -s $JOBCOMP ]] || fail "the cluster wrote no job history ($JOBCOMP)"
ran=$(grep -c 'StartTime=[0-9]' "$JOBCOMP")
printf 'name,cpus,memory_mib,gpus\ngpu1,8,16000,2\ngpu2,8,16000,2\ncpu1,8,16000,0\ncpu2,8,16000,0\n' \
  >"$T/nodes.csv"
expect_rc 0 "simulate replays this cluster's jobcomp history" -- \
  "$GM" simulate --trace "$JOBCOMP" --nodes "$T/nodes.csv" -o "$T/history.json"
$PY - "$T/history.json" "$ran" <<'PY' || fail "the history's replay: $(head -c 1500 "$T/history.json")"
import json, sys
sim, ran = json.load(open(sys.argv[1])), int(sys.argv[2])
assert ran > 0, "no job ran"
assert sim["inputs"]["tasks"] + sim["inputs"]["dropped"] >= ran, (sim["inputs"], ran)
for p in sim["policies"]:
    assert p["events"] == 2 * sim["inputs"]["tasks"], p
PY
ok "every job of the history that ran was replayed under each policy"
done_suite
