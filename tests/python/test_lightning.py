"""A PyTorch Lightning script, unchanged, under goldminer: a LightningDataModule whose
train_dataloader has 2 workers and draws random augmentations, a LightningModule
trained by Trainer(max_epochs=2, accelerator="cpu") after seed_everything. Stock,
under `goldminer run --workers 2` (its DataLoader on virtual workers), and with a
data worker killed (SIGKILL) partway, it must see the same batches (SHA-256 of
each) and log the same losses; `goldminer profile` of it measures its DataLoader
workers. Lightning is installed in the torch 2.x environment only
(python/torch2/requirements.txt): tests/CMakeLists.txt runs this file there. Run:
GOLDMINER_TEST_PYTHON=.venv-torch2/bin/python .venv-torch2/bin/python -m unittest \
  discover -s tests/python -p test_lightning.py
"""

import json
import os
import shutil
import subprocess
import tempfile
import unittest

from test_offload import KILL, PYTHON, TIMEOUT_S, goldminer_binary

# argv: OUT (JSON: {"digests": [[epoch, batch, sha256], ...], "losses": [...]}), then
# "kill" to kill a data worker at epoch 0's batch 2 (under goldminer run), or "busy"
# for items that each take 3 ms of CPU (so that a profile's few measured steps
# see the workers' CPU, counted in 10 ms ticks).
SCRIPT = KILL + '''
import hashlib, json, sys, time
import lightning as L
import torch
from torch.utils.data import DataLoader, Dataset

class Noisy(Dataset):  # a random augmentation per item, drawn in the worker
    def __init__(self):
        self.busy = sys.argv[2:] == ["busy"]
    def __len__(self):
        return 48
    def __getitem__(self, i):
        if self.busy:
            start = time.process_time()
            while time.process_time() - start < 0.003:
                pass
        x = torch.full((4,), float(i)) + torch.randn(4) * 0.1
        return x, torch.tensor(i % 3)

class Data(L.LightningDataModule):
    def train_dataloader(self):
        return DataLoader(Noisy(), batch_size=8, shuffle=True, num_workers=2)

class Model(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(4, 3)
        self.digests, self.losses = [], []
    def training_step(self, batch, batch_idx):
        x, y = batch
        h = hashlib.sha256(x.numpy().tobytes() + y.numpy().tobytes()).hexdigest()
        self.digests.append([self.current_epoch, batch_idx, h])
        loss = torch.nn.functional.cross_entropy(self.layer(x), y)
        self.losses.append(round(float(loss), 6))
        self.log("loss", loss)
        if len(sys.argv) > 2 and sys.argv[2] == "kill" and self.current_epoch == 0 \\
                and batch_idx == 2:
            kill_a_data_worker()
        return loss
    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)

L.seed_everything(7, workers=True)
model = Model()
L.Trainer(max_epochs=2, accelerator="cpu", logger=False, enable_checkpointing=False,
          enable_progress_bar=False, enable_model_summary=False).fit(model, Data())
with open(sys.argv[1], "w") as f:
    json.dump({"digests": model.digests, "losses": model.losses}, f)
'''


class LightningTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="goldminer-lightning-test-")
        cls.script = os.path.join(cls.tmp, "train.py")
        with open(cls.script, "w") as f:
            f.write(SCRIPT)
        cls.env = {k: v for k, v in os.environ.items() if not k.startswith("GOLDMINER_")}
        cls.env["PYTHONPATH"] = ""
        cls.stock = cls.run_script([], "stock")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    @classmethod
    def run_script(cls, prefix, name, *args):
        out = os.path.join(cls.tmp, name + ".json")
        proc = subprocess.run(prefix + [PYTHON, cls.script, out, *args], capture_output=True,
                              text=True, env=cls.env, timeout=TIMEOUT_S, cwd=cls.tmp)
        if proc.returncode != 0:
            raise AssertionError(f"{name}: exit {proc.returncode}: {proc.stderr[-3000:]}")
        with open(out) as f:
            return json.load(f), proc.stderr

    def test_stock_sees_two_epochs_of_six_batches(self):
        got, _ = self.stock
        self.assertEqual([d[:2] for d in got["digests"]],
                         [[e, b] for e in range(2) for b in range(6)])
        self.assertNotEqual(got["digests"][0][2], got["digests"][6][2])  # epochs differ

    def test_under_goldminer_run_the_batches_and_losses_are_stock(self):
        served, stderr = self.run_script([goldminer_binary(), "run", "--workers", "2", "--"],
                                         "served")
        self.assertIn("1 DataLoader(s) on virtual workers, 0 on stock local workers", stderr)
        self.assertEqual(served, self.stock[0])

    def test_after_a_kill_9_of_a_data_worker_the_batches_and_losses_are_stock(self):
        served, stderr = self.run_script([goldminer_binary(), "run", "--workers", "2", "--"],
                                         "killed", "kill")
        self.assertIn("lost its data worker", stderr)
        self.assertEqual(served, self.stock[0])

    def test_goldminer_profile_measures_its_dataloader_workers(self):
        report = os.path.join(self.tmp, "profile.json")
        proc = subprocess.run([goldminer_binary(), "profile", "--no-db", "-o", report, "--",
                               PYTHON, self.script, os.path.join(self.tmp, "p.json"), "busy"],
                              capture_output=True, text=True, env=self.env, timeout=TIMEOUT_S,
                              cwd=self.tmp)
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        with open(report) as f:
            profile = json.load(f)
        trainer = profile["trainer"]
        self.assertEqual(trainer["source"], "torch", json.dumps(trainer)[:2000])
        self.assertGreaterEqual(trainer["steps_recorded"], 12, json.dumps(trainer)[:2000])
        self.assertEqual(trainer["dataloader"]["workers"], 2, json.dumps(trainer)[:2000])
        self.assertGreater(trainer["dataloader"]["samples"], 0, json.dumps(trainer)[:2000])


if __name__ == "__main__":
    unittest.main()
