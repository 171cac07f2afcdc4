#!/usr/bin/env bash
# End-to-end: the coordinator of a run dies mid-epoch (kill -9 of its process,
# `goldminer coordinator`, run's child). Run starts it again on the same address
# from its journal; the workers and the trainer come back to it in their ids and
# session, and every sample reaches the trainer exactly once. A journal found
# corrupted is not replayed: the run fails saying where. Locally, then on the
# suite's Slurm cluster as a GPU job with --mem, its workers job steps.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/slurm_cluster.sh"
trap 'slurm_cluster_stop; rm -rf "$T"' EXIT

sleepy_pipeline "$T/pipeline.json" 1200 0.001
DB=$T/runs.db

# 1. Local: killed twice, in epoch 0 and in epoch 1.
GM_TEST_KILL_COORDINATOR_AFTER=5,150 run_trainer revived "with its coordinator killed twice" -- \
  --backend local --pipeline "$T/pipeline.json" --workers 2 --epochs 2 --samples-per-split 20 \
  --db "$DB" --name revived -- $PY "$SRC/tests/e2e/trainer.py" "$T/revived.json" 2
ok "a run whose coordinator was killed twice ends"
exactly_once "$T/revived.json" 1200 || { cat "$T/revived.err" >&2; fail "samples lost or repeated"; }
ok "every sample of both epochs reached the trainer exactly once"
[[ $(grep -cE "starting it again on .* from its journal" "$T/revived.err") == 2 ]] ||
  { cat "$T/revived.err" >&2; fail "run did not say twice that it started the coordinator again"; }
ok "run says each time that it started the coordinator again from its journal"
[[ $(sqlite3 "$DB" "SELECT status FROM runs WHERE id = 'revived'") == succeeded ]] ||
  fail "runs.db: $(sqlite3 "$DB" "SELECT status FROM runs WHERE id = 'revived'")"
sqlite3 "$DB" "SELECT message FROM events WHERE run_id = 'revived'" |
  grep -q "started again from its journal 2 time(s)" ||
  fail "runs.db events: $(sqlite3 "$DB" "SELECT message FROM events WHERE run_id = 'revived'")"
ok "runs.db: succeeded, and the coordinator's two restarts recorded"
# The kills are the only thing said: no worker was lost, nothing made twice.
quiet_output "$T/revived.err" "a run whose coordinator was killed" \
  "the coordinator \(pid [0-9]+\) was killed by signal 9"

# 2. A journal corrupted before the kill: not replayed; the run fails naming it.
if GM_TEST_KILL_COORDINATOR_AFTER=5 GM_TEST_CORRUPT_JOURNAL=1 gm_run corrupt -- --backend local \
  --pipeline "$T/pipeline.json" --workers 2 --epochs 1 --samples-per-split 20 --no-db -- \
  $PY "$SRC/tests/e2e/trainer.py" "$T/corrupt.json" 1; then
  cat "$T/corrupt.err" >&2
  fail "a run whose coordinator's journal was corrupted succeeded"
fi
[[ $? != 124 ]] || fail "a run whose coordinator's journal was corrupted hung"
expect_in "$T/corrupt.err" "coordinator.journal:1: corrupted" \
  "the run fails naming the journal's corrupted line"

# 3. An unchanged PyTorch program whose DataLoader runs on the data workers
#    (offloaded): the coordinator is killed between its epochs; the program's
#    channel comes back, its next epochs' virtual workers are placed, and its
#    batches are those it makes without goldminer, bit for bit.
cat >"$T/loader.py" <<'PY'
import hashlib, json, os, signal, sys, time
import torch
from torch.utils.data import DataLoader, Dataset

class Items(Dataset):
    def __len__(self):
        return 48
    def __getitem__(self, i):
        return torch.rand(2) + i, i

def kill_coordinator():  # test scaffolding: the coordinator is run's child
    for entry in os.listdir("/proc"):
        try:
            stat = open(f"/proc/{entry}/stat").read()
            cmd = open(f"/proc/{entry}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == os.getppid() and b"coordinator" in cmd[1:]:
            os.kill(int(entry), signal.SIGKILL)
            return
    sys.exit("no coordinator process")

generator = torch.Generator()
generator.manual_seed(3)
loader = DataLoader(Items(), batch_size=4, shuffle=True, num_workers=2, generator=generator)
digests = []
for epoch in range(3):
    for x, i in loader:
        digests.append(hashlib.sha256(x.numpy().tobytes() + i.numpy().tobytes()).hexdigest())
    if epoch < 2 and os.environ.get("GM_TEST_KILL") == "1":
        kill_coordinator()
json.dump({"digests": digests}, open(sys.argv[1], "w"))
PY
PYTHONPATH= $PY "$T/loader.py" "$T/loader.stock.json" || fail "the program fails stock"
GM_TEST_KILL=1 run_trainer offload "an unchanged program whose coordinator was killed" -- \
  --backend local --workers 2 --no-db -- $PY "$T/loader.py" "$T/loader.served.json"
cmp -s <($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["digests"])' "$T/loader.stock.json") \
  <($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["digests"])' "$T/loader.served.json") ||
  { cat "$T/offload.err" >&2; fail "the offloaded DataLoader's batches differ from stock's"; }
[[ $(grep -cE "starting it again on .* from its journal" "$T/offload.err") == 2 ]] ||
  { cat "$T/offload.err" >&2; fail "the coordinator was not started again twice"; }
grep -q "offload channel [0-9]* is back" "$T/offload.err" ||
  { cat "$T/offload.err" >&2; fail "the program's offload channel did not come back"; }
ok "an unchanged PyTorch program's offloaded DataLoader: the coordinator killed twice, batches as stock's"
# What the program's DataLoaders did is said as before (the notes are journaled).
grep -qE "succeeded: .* [1-9][0-9]* DataLoader\(s\) on virtual workers" "$T/offload.err" ||
  { cat "$T/offload.err" >&2; fail "the run's end does not count the DataLoaders served"; }
ok "the run's end counts the DataLoaders served before the deaths"
quiet_output "$T/offload.err" "the offloaded program whose coordinator was killed" \
  "the coordinator \(pid [0-9]+\) was killed by signal 9"

# 4. Slurm: a GPU job with --mem; its workers are job steps; the coordinator is
#    killed mid-epoch and comes back; every sample once.
slurm_cluster_start "$T/cluster" >/dev/null || fail "the Slurm cluster did not start"
cat >"$T/slurm.sbatch" <<SCRIPT
#!/bin/bash
#SBATCH --partition=gpu --nodes=1 --ntasks=1 --cpus-per-task=4 --gres=gpu:1 --mem=4000M
exec "$GM" run --pipeline "$T/pipeline.json" --workers 2 --epochs 1 --samples-per-split 20 \
  --db "$DB" --name slurm -- $PY "$SRC/tests/e2e/trainer.py" "$T/slurm.json" 1
SCRIPT
id=$(GM_TEST_KILL_COORDINATOR_AFTER=5 sbatch --parsable --chdir="$T" --output="$T/slurm.out" \
  --export=ALL "$T/slurm.sbatch") || fail "sbatch refused the job"
id=${id%%;*}
slurm_job_completes "$id" "$T/slurm.out" || fail "job $id did not complete"
exactly_once "$T/slurm.json" 1200 || { cat "$T/slurm.out" >&2; fail "samples lost or repeated"; }
ok "Slurm GPU job: its coordinator killed mid-epoch, every sample exactly once"
[[ $(sqlite3 "$DB" "SELECT backend || ' ' || status FROM runs WHERE id = 'slurm'") == "slurm succeeded" ]] ||
  fail "runs.db: $(sqlite3 "$DB" "SELECT backend, status FROM runs WHERE id = 'slurm'")"
ok "runs.db: the Slurm run succeeded"
expect_in "$T/slurm.out" "from its journal" "the job's output says the coordinator was started again"
quiet_output "$T/slurm.out" "the Slurm job whose coordinator was killed" \
  "the coordinator \(pid [0-9]+\) was killed by signal 9"
done_suite
