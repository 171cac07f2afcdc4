"""Tests of goldminer's PyTorch import hook (python/goldminer/_profile_hook/), the
way `goldminer profile` uses it: real torch programs run by /usr/bin/python3 with
the hook's directory first on PYTHONPATH and GOLDMINER_PROFILE_DIR set, and their
step logs (format: core/step_log.h) read back. Run:
/usr/bin/python3 -m unittest discover -s tests/python
"""

import os
import shutil
import subprocess
import tempfile
import textwrap
import unittest

HOOK_DIR = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                         "python", "goldminer", "_profile_hook"))
PYTHON = os.environ.get("GOLDMINER_TEST_PYTHON", "/usr/bin/python3")  # the torch under test
TIMEOUT_S = 180  # a subprocess ends by then (importing torch takes a few seconds)

# A map-style dataset of 10 items in batches of 4: 3 batches of 4, 4 and 2 samples.
# argv: num_workers, kind of item ("tuple" or "dict").
DATALOADER_PROGRAM = """
import sys
import torch
from torch.utils.data import DataLoader, Dataset

class Items(Dataset):
    def __len__(self):
        return 10
    def __getitem__(self, i):
        x = torch.full((3,), float(i))
        return {"x": x, "y": i} if sys.argv[2] == "dict" else (x, i)

for batch in DataLoader(Items(), batch_size=4, num_workers=int(sys.argv[1])):
    x = batch["x"] if isinstance(batch, dict) else batch[0]
    print(x.shape[0], x[:, 0].tolist())
print("done")
"""

# Batches without a tensor, a batch whose inspection fails inside the hook, and a
# dataset error the program handles: the hook must not change what the program sees.
FALLBACK_PROGRAM = """
import torch
from torch.utils.data import DataLoader, Dataset

class Items(Dataset):
    def __len__(self):
        return 5
    def __getitem__(self, i):
        if i == 4:
            raise ValueError("item 4 is broken")
        return "s%d" % i

class Weird:
    @property
    def shape(self):
        raise RuntimeError("no shape here")

print(list(DataLoader(Items(), batch_size=2, sampler=[0, 1, 2, 3],
                      collate_fn=lambda items: "+".join(items))))
print(list(DataLoader(Items(), batch_size=None, sampler=[0, 1])))
print(len(list(DataLoader(Items(), batch_size=3, sampler=[0], collate_fn=lambda _: Weird()))))
try:
    list(DataLoader(Items(), batch_size=2))
except ValueError as e:
    print("caught", "item 4 is broken" in str(e))
"""


def parse_step_log(path):
    """{"pid", "source", "steps": [(begin, end, samples)], "costs": [previous_cost_ns],
    "loader": {step index: (workers, cpu_ns, bytes)}, "errors", "overhead"}."""
    with open(path) as f:
        lines = f.read().split("\n")
    assert lines[-1] == "", "the log must end with a complete line"
    header = lines[0].split()
    assert header[:5] == ["#", "goldminer", "step", "log", "1"], lines[0]
    log = {"pid": int(header[5][len("pid="):]), "source": header[6][len("source="):],
           "steps": [], "costs": [], "loader": {}, "errors": [], "overhead": []}
    for line in lines[1:-1]:
        kind, _, rest = line.partition(" ")
        if kind == "S":
            begin, end, samples, cost = (int(v) for v in rest.split())
            log["steps"].append((begin, end, samples))
            log["costs"].append(cost)
        elif kind == "D":
            step = len(log["steps"]) - 1
            assert step >= 0 and step not in log["loader"], "a D line of no step of its own"
            log["loader"][step] = tuple(int(v) for v in rest.split())
        elif kind == "E":
            log["errors"].append(rest)
        elif kind == "O":
            seconds, records = rest.split()
            log["overhead"].append((float(seconds), int(records)))
        else:
            assert kind == "#", "unexpected line %r" % line
    return log


class ProfileHookTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="goldminer-hook-test-")
        self.profile_dir = os.path.join(self.tmp, "profile")
        os.mkdir(self.profile_dir)

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def run_program(self, source, args=(), hook=True, profile=True, extra_path=()):
        """Runs `source` as a script; returns the CompletedProcess (text output)."""
        script = os.path.join(self.tmp, "program.py")
        with open(script, "w") as f:
            f.write(textwrap.dedent(source))
        env = {k: v for k, v in os.environ.items()
               if k not in ("PYTHONPATH", "GOLDMINER_PROFILE_DIR")}
        path = ([HOOK_DIR] if hook else []) + list(extra_path)
        if path:
            env["PYTHONPATH"] = os.pathsep.join(path)
        if profile:
            env["GOLDMINER_PROFILE_DIR"] = self.profile_dir
        done = subprocess.run([PYTHON, script] + list(args), env=env, capture_output=True,
                              text=True, timeout=TIMEOUT_S, cwd=self.tmp)
        self.assertEqual(done.returncode, 0, done.stderr)
        return done

    def logs(self):
        names = sorted(os.listdir(self.profile_dir))
        self.assertTrue(all(n.startswith("steps.") and n.endswith(".log") for n in names), names)
        return [parse_step_log(os.path.join(self.profile_dir, n)) for n in names]

    def check_dataloader(self, num_workers, kind):
        plain = self.run_program(DATALOADER_PROGRAM, [str(num_workers), kind], hook=False,
                                 profile=False)
        hooked = self.run_program(DATALOADER_PROGRAM, [str(num_workers), kind])
        self.assertEqual(hooked.stdout, plain.stdout)
        self.assertEqual(hooked.stderr, plain.stderr)
        logs = self.logs()
        self.assertEqual(len(logs), 1, "only the main process records steps")
        log = logs[0]
        self.assertEqual(log["source"], "torch")
        self.assertEqual([s[2] for s in log["steps"]], [4, 4, 2])
        for begin, end, _ in log["steps"]:
            self.assertGreaterEqual(end, begin)
        for (_, end, _), (begin, _, _) in zip(log["steps"], log["steps"][1:]):
            self.assertGreaterEqual(begin, end)
        self.assertEqual(log["errors"], [])
        self.assertEqual(len(log["overhead"]), 1)
        seconds, records = log["overhead"][0]
        self.assertEqual(records, 3)
        self.assertGreaterEqual(seconds, 0.0)
        if num_workers == 0:
            self.assertEqual(log["loader"], {})  # no worker process made the batches
        else:
            # Each batch from the worker processes: their count, their CPU so far
            # (cumulative), the batch's bytes (x float32 and y int64: 4 + 8 a sample
            # and column; 3 columns of x).
            self.assertEqual(sorted(log["loader"]), [0, 1, 2])
            self.assertEqual([d[0] for d in log["loader"].values()], [num_workers] * 3)
            cpu = [d[1] for d in log["loader"].values()]
            self.assertEqual(cpu, sorted(cpu))
            self.assertEqual([d[2] for d in log["loader"].values()],
                             [n * (3 * 4 + 8) for n in (4, 4, 2)])

    def test_single_process_dataloader_records_one_step_per_batch(self):
        self.check_dataloader(0, "tuple")

    def test_worker_processes_do_not_record_and_dict_batches_count_their_tensor(self):
        self.check_dataloader(2, "dict")

    def test_batches_without_tensors_fall_back_and_hook_errors_become_e_lines(self):
        done = self.run_program(FALLBACK_PROGRAM)
        self.assertEqual(done.stdout.split("\n"),
                         ["['s0+s1', 's2+s3']", "['s0', 's1']", "1", "caught True", ""])
        [log] = self.logs()
        # Collated to a string: batch_size (2, 2); batch_size=None: 1 each; Weird: an
        # error, no step; lists of strings: batch_size (2, 2), then the ValueError of
        # the broken item, which is not a step.
        self.assertEqual([s[2] for s in log["steps"]], [2, 2, 1, 1, 2, 2])
        self.assertEqual(len(log["errors"]), 1)
        self.assertIn("RuntimeError: no shape here", log["errors"][0])
        self.assertEqual(log["overhead"][0][1], 6)

    def test_a_process_with_the_goldminer_client_open_leaves_the_steps_to_it(self):
        program = """
        import sys, types
        loader = types.ModuleType("goldminer.loader")
        loader._clients_opened = 1  # a goldminer.Loader client opened
        sys.modules["goldminer.loader"] = loader
        from torch.utils.data import DataLoader
        print(len(list(DataLoader(list(range(6)), batch_size=2))))
        """
        self.assertEqual(self.run_program(program).stdout, "3\n")
        self.assertEqual(os.listdir(self.profile_dir), [])

    def test_the_client_library_loaded_for_an_offload_alone_leaves_the_steps_to_the_hook(self):
        program = """
        import sys, types
        loader = types.ModuleType("goldminer.loader")
        loader._clients_opened = 0  # the library loaded for an offloaded DataLoader only
        sys.modules["goldminer.loader"] = loader
        from torch.utils.data import DataLoader
        print(len(list(DataLoader(list(range(6)), batch_size=2))))
        """
        self.assertEqual(self.run_program(program).stdout, "3\n")
        logs = self.logs()
        self.assertEqual(len(logs), 1)
        self.assertEqual([s[2] for s in logs[0]["steps"]], [2, 2, 2])

    def test_a_shadowed_sitecustomize_still_runs_and_nothing_is_hooked_without_the_variable(self):
        other = os.path.join(self.tmp, "other")
        os.mkdir(other)
        with open(os.path.join(other, "sitecustomize.py"), "w") as f:
            f.write("import builtins\nbuiltins.CHAINED = __file__\n")
        program = """
        import builtins, sys
        import torch.utils.data.dataloader as dl
        print(builtins.CHAINED)
        print(getattr(dl._BaseDataLoaderIter.__next__, "_goldminer_wrapped", False))
        print([type(f).__name__ for f in sys.meta_path if type(f).__name__ == "_Finder"])
        """
        for profile, wrapped in ((False, "False"), (True, "True")):
            done = self.run_program(program, profile=profile, extra_path=[other])
            self.assertEqual(done.stdout.split("\n"),
                             [os.path.join(other, "sitecustomize.py"), wrapped, "[]", ""])
        self.assertEqual(os.listdir(self.profile_dir), [], "no batch, no step log")

    def test_a_program_without_torch_is_unaffected(self):
        program = """
        import sys
        print(sorted(m for m in sys.modules if m != "sitecustomize"))
        """
        plain = self.run_program(program, hook=False, profile=False)
        hooked = self.run_program(program)
        self.assertEqual(hooked.stdout, plain.stdout, "the hook imports nothing more")
        self.assertNotIn("'torch", hooked.stdout)
        self.assertEqual(hooked.stderr, "")
        self.assertEqual(os.listdir(self.profile_dir), [])


if __name__ == "__main__":
    unittest.main()
