"""`goldminer run --offload native` (python/goldminer/_native.py): which
DataLoaders are recognised and why others are not, the native ops against
torchvision's on real photos, and unchanged scripts run native beside stock."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
from torch.utils.data import ConcatDataset, DataLoader, Subset, TensorDataset  # noqa: E402
from torchvision import datasets, transforms as T  # noqa: E402
from torchvision.datasets.folder import pil_loader  # noqa: E402

from goldminer import _native  # noqa: E402
from test_offload import PHOTOS, PYTHON, TIMEOUT_S, goldminer_binary  # noqa: E402

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
# Real photos: the test corpus's and a few of Debian's wallpapers (1.3 to 16 MP);
# a grayscale, a CMYK, a 4:4:4 and a progressive JPEG.
WALLPAPERS = "/usr/share/backgrounds"
ODD = os.path.join(ROOT, "tests", "data", "images")


def photos():
    found = sorted(os.path.join(PHOTOS, f) for f in os.listdir(PHOTOS) if f.startswith("photo"))
    found += sorted(os.path.join(ODD, f) for f in os.listdir(ODD)
                    if f.startswith(("photo", "gray", "cmyk", "progressive")))
    if os.path.isdir(WALLPAPERS):
        found += sorted(os.path.join(WALLPAPERS, f) for f in os.listdir(WALLPAPERS)
                        if f.endswith(".jpg"))[:3]
    return found


def image_folder(root):
    """The corpus's photos, each twice, in two classes."""
    names = sorted(f for f in os.listdir(PHOTOS) if f.startswith("photo"))
    for n, name in enumerate(names * 2):
        d = os.path.join(root, "ab"[n % 2])
        os.makedirs(d, exist_ok=True)
        shutil.copy(os.path.join(PHOTOS, name), os.path.join(d, f"{n}.jpg"))
    return root


class RecognitionTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="goldminer-native-test-")
        cls.root = image_folder(os.path.join(cls.tmp, "images"))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def plan(self, steps, wrap=None, **loader):
        ds = datasets.ImageFolder(self.root, transform=T.Compose(steps))
        return _native.plan(DataLoader(wrap(ds) if wrap else ds, batch_size=4, **loader))

    def refused(self, why, steps, **kw):
        with self.assertRaises(_native.NotNative) as e:
            self.plan(steps, **kw)
        self.assertIn(why, str(e.exception))

    def test_the_imagenet_transforms_are_recognised_with_their_parameters(self):
        p = self.plan([T.RandomResizedCrop(56, scale=(0.2, 0.9), ratio=(0.5, 2.0)),
                       T.RandomHorizontalFlip(0.3), T.ToTensor(), T.Normalize(MEAN, STD)])
        self.assertEqual([s["op"] for s in p["full"]],
                         ["decode_jpeg", "random_resized_crop", "flip", "normalize", "to_tensor"])
        self.assertEqual(p["full"][1], {"op": "random_resized_crop", "size": [56, 56],
                                        "scale": [0.2, 0.9], "ratio": [0.5, 2.0]})
        self.assertEqual(p["full"][2]["p"], 0.3)
        self.assertEqual(p["full"][3]["mean"], MEAN)
        self.assertEqual(p["cut"][-1], {"op": "to_tensor", "layout": "CHW", "dtype": "uint8"})
        self.assertEqual(p["shape"], [3, 56, 56])
        self.assertEqual(len(p["samples"]), len(datasets.ImageFolder(self.root)))
        self.assertEqual({label for _, label in p["samples"]}, {0, 1})
        p = self.plan([T.Resize(64), T.CenterCrop((48, 40)), T.PILToTensor(),
                       T.ConvertImageDtype(torch.float32)], wrap=lambda d: Subset(d, [5, 1]))
        self.assertEqual([s["op"] for s in p["full"]],
                         ["decode_jpeg", "resize", "center_crop", "to_tensor"])
        self.assertEqual(p["shape"], [3, 48, 40])
        ds = datasets.ImageFolder(self.root)
        self.assertEqual(p["samples"], [[ds.samples[5][0], ds.samples[5][1]],
                                        [ds.samples[1][0], ds.samples[1][1]]])

    def test_a_concat_dataset_of_folders_with_one_transform_is_their_samples_in_order(self):
        steps = [T.Resize(64), T.CenterCrop(48), T.ToTensor()]
        a = datasets.ImageFolder(self.root, transform=T.Compose(steps))
        b = datasets.ImageFolder(self.root, transform=T.Compose(list(steps)))
        p = _native.plan(DataLoader(ConcatDataset([Subset(a, [5, 1]), b]), batch_size=4))
        self.assertEqual(p["samples"], [[a.samples[5][0], a.samples[5][1]],
                                        [a.samples[1][0], a.samples[1][1]]] +
                         [[path, label] for path, label in b.samples])
        self.assertEqual(p["shape"], [3, 48, 48])
        p = _native.plan(DataLoader(Subset(ConcatDataset([a, b]), [len(a) + 2, 0]),
                                    batch_size=2))
        self.assertEqual(p["samples"], [[b.samples[2][0], b.samples[2][1]],
                                        [a.samples[0][0], a.samples[0][1]]])
        other = datasets.ImageFolder(self.root, transform=T.Compose(
            [T.Resize(64), T.CenterCrop(40), T.ToTensor()]))
        with self.assertRaisesRegex(_native.NotNative, "different transforms \\(folder 1's"):
            _native.plan(DataLoader(ConcatDataset([a, other]), batch_size=4))
        with self.assertRaisesRegex(_native.NotNative, "the dataset's dataset 1 is a TensorDataset"):
            _native.plan(DataLoader(ConcatDataset([a, TensorDataset(torch.zeros(2))]),
                                    batch_size=4))

    def test_what_is_not_recognised_is_named_with_why(self):
        self.refused("step 1 (Lambda): a Lambda", [T.Resize((8, 8)), T.Lambda(lambda x: x),
                                                   T.ToTensor()])
        self.refused("interpolation NEAREST",
                     [T.Resize((8, 8), interpolation=T.InterpolationMode.NEAREST), T.ToTensor()])
        self.refused("max_size", [T.Resize(8, max_size=20), T.CenterCrop(8), T.ToTensor()])
        self.refused("step 1 (ColorJitter): not one of goldminer's ops",
                     [T.CenterCrop(8), T.ColorJitter(0.1), T.ToTensor()])
        self.refused("size is not fixed", [T.Resize(8), T.ToTensor()])
        self.refused("only a Normalize may follow ToTensor",
                     [T.CenterCrop(8), T.ToTensor(), T.RandomErasing()])
        self.refused("does not end in ToTensor", [T.CenterCrop(8)])
        self.refused("collate_fn of its own", [T.CenterCrop(8), T.ToTensor()],
                     collate_fn=lambda b: b)

        class Mine(datasets.ImageFolder):
            def __getitem__(self, i):
                return super().__getitem__(i)

        with self.assertRaisesRegex(_native.NotNative, "Mine has a __getitem__ of its own"):
            _native.plan(DataLoader(Mine(self.root, transform=T.ToTensor()), batch_size=2))
        png = os.path.join(self.tmp, "png")
        os.makedirs(os.path.join(png, "a"))
        shutil.copy(os.path.join(PHOTOS, "photo0.jpg"), os.path.join(png, "a", "x.png"))
        with self.assertRaisesRegex(_native.NotNative, "x.png is not a JPEG"):
            _native.plan(DataLoader(datasets.ImageFolder(png, transform=T.Compose(
                [T.CenterCrop(8), T.ToTensor()])), batch_size=2))


class OpsTest(unittest.TestCase):
    """The native ops against torchvision's on real photos: the deterministic
    steps give torchvision's values, to the bit in uint8 (decode, resize, crop)
    and to float32's rounding after Normalize (at most 4.8e-7 measured: the
    engine's one fused multiply-add per value against torch's subtract then
    divide), whichever size. Where they differ: a CenterCrop larger than the
    image, which torchvision pads with black and the engine's center_crop fills
    by resizing what there is (Resize(256) then CenterCrop(224) never meets it)."""

    def compare(self, steps):
        cut, full, shape, mean, _ = _native._stages(steps)
        reference = T.Compose(steps)
        worst = 0.0
        for path in photos():
            want = reference(pil_loader(path))
            got = _native.Ops(full).batch([path], [0], 7, shape, torch.float32)[0]
            self.assertEqual(got.shape, want.shape, path)
            worst = max(worst, (got - want).abs().max().item())
            if mean is None:  # the cut: uint8, which the trainer widens as ToTensor does
                u8 = _native.Ops(cut).batch([path], [0], 7, shape, torch.uint8)[0]
                self.assertTrue(torch.equal(u8.float().div(255), want), path)
        return worst

    def test_resize_center_crop_to_tensor_and_normalize_give_torchvisions_values(self):
        for steps in ([T.Resize((224, 224)), T.ToTensor()],
                      [T.Resize(256), T.CenterCrop(224), T.ToTensor()],
                      [T.Resize(80), T.CenterCrop((64, 48)), T.PILToTensor(),
                       T.ConvertImageDtype(torch.float32)],
                      [T.CenterCrop(40), T.ToTensor()],
                      [T.Resize(256), T.CenterCrop(224), T.ToTensor(), T.Normalize(MEAN, STD)]):
            normalized = type(steps[-1]) is T.Normalize
            self.assertLessEqual(self.compare(steps), 1e-6 if normalized else 0.0, steps)

    def test_a_random_crop_is_in_range_and_the_same_for_the_same_seed_and_index(self):
        steps = [T.RandomResizedCrop(32, scale=(0.5, 0.5), ratio=(1.0, 1.0)),
                 T.RandomHorizontalFlip(), T.ToTensor()]
        _, full, shape, _, _ = _native._stages(steps)
        ops = _native.Ops(full)
        path = photos()[0]
        a = ops.batch([path, path, path], [3, 3, 4], 11, shape, torch.float32)
        self.assertTrue(torch.equal(a[0], a[1]))
        self.assertFalse(torch.equal(a[0], a[2]), "another index, another draw")
        self.assertTrue(torch.equal(a, ops.batch([path, path, path], [3, 3, 4], 11, shape,
                                                 torch.float32)))
        self.assertFalse(torch.equal(a, ops.batch([path, path, path], [3, 3, 4], 12, shape,
                                                  torch.float32)), "another seed")
        self.assertGreaterEqual(a.min().item(), 0.0)
        self.assertLessEqual(a.max().item(), 1.0)

    def test_a_batch_made_in_a_result_memfd_is_sent_from_there(self):
        import io
        import socket
        from goldminer import _vwire
        steps = [T.Resize(80), T.CenterCrop(64), T.ToTensor()]
        cut, full, shape, mean, std = _native._stages(steps)
        plan = {"samples": [[p, n % 2] for n, p in enumerate(photos()[:4])], "cut": cut,
                "full": full, "shape": shape, "mean": mean, "std": std}
        recycler = _vwire.Recycler()
        collate = _native.Collate(plan, False, 1, recycler)
        a, b = socket.socketpair()
        self.addCleanup(a.close)
        self.addCleanup(b.close)
        stream = io.BytesIO()
        _vwire.write_shm(a, stream, _vwire.RESULT, (0, collate([3, 0, 2])), recycler)
        head, fds, _, _ = socket.recv_fds(b, 1 << 16, 1)
        self.assertEqual(recycler.sent_in_place, 1, "no copy")
        self.assertEqual(recycler.made, {})
        released = []
        kind, pickled, buffers = _vwire.read_raw(io.BytesIO(head + stream.getvalue()),
                                                 lambda: fds.pop(), release=released.append)
        _, (images, labels) = _vwire.loads(kind, pickled, buffers)
        want = torch.stack([T.Compose(steps)(pil_loader(plan["samples"][i][0]))
                            for i in (3, 0, 2)])
        self.assertTrue(torch.equal(images, want))
        self.assertEqual(labels.tolist(), [1, 0, 0])
        # A batch that fails gives its memfd back.
        plan["samples"][1][0] = "/no-such.jpg"
        collate = _native.Collate(plan, False, 1, recycler)
        with self.assertRaisesRegex(ValueError, "no-such.jpg"):
            collate([0, 1])
        self.assertEqual((recycler.made, len(recycler.out)), ({}, 1))

    def test_a_file_that_does_not_decode_is_named(self):
        _, full, shape, _, _ = _native._stages([T.CenterCrop(8), T.ToTensor()])
        bad = os.path.join(ODD, "random_bytes.jpg")
        with self.assertRaisesRegex(ValueError, "random_bytes.jpg: decode_jpeg"):
            _native.Ops(full).batch([bad], [0], 1, shape, torch.float32)
        with self.assertRaisesRegex(ValueError, "no-such.jpg"):
            _native.Ops(full).batch(["/no-such.jpg"], [0], 1, shape, torch.float32)


SCRIPT = r'''
import hashlib, json, sys
import torch
from torch.utils.data import DataLoader
from torchvision import datasets, transforms as T

root, variant = sys.argv[1], sys.argv[2]
eval_steps = [T.Resize(72), T.CenterCrop(64), T.ToTensor(),
              T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])]
steps = {"eval": eval_steps, "concat": eval_steps, "sampler": eval_steps,
         "train": [T.RandomResizedCrop(48), T.RandomHorizontalFlip(), T.ToTensor(),
                   T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])]}[variant]
torch.manual_seed(0)
dataset = datasets.ImageFolder(root, transform=T.Compose(steps))
if variant == "concat":  # two folders, one of them in part
    dataset = torch.utils.data.ConcatDataset([
        torch.utils.data.Subset(datasets.ImageFolder(root, transform=T.Compose(steps)),
                                [3, 0, 7]), dataset])
loader = DataLoader(dataset, batch_size=4, shuffle=True, num_workers=2)
if variant == "sampler":  # rank 1 of 2's share, in batches of 3 a batch_sampler makes
    ranks = torch.utils.data.DistributedSampler(dataset, num_replicas=2, rank=1, seed=5)
    loader = DataLoader(dataset, num_workers=2, batch_sampler=torch.utils.data.BatchSampler(
        ranks, 3, drop_last=False))
out = []
for epoch in range(2):
    if variant == "sampler":
        ranks.set_epoch(epoch)
    for images, labels in loader:
        out.append({"labels": labels.tolist(), "shape": list(images.shape),
                    "dtype": str(images.dtype), "images": images.flatten().tolist()})
print(json.dumps(out))
'''


class ScriptTest(unittest.TestCase):
    """SCRIPT over an image folder of the corpus's photos, in a folder of its own,
    and the environment it runs in (no goldminer variables)."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="goldminer-native-script-")
        cls.root = image_folder(os.path.join(cls.tmp, "images"))
        cls.script = os.path.join(cls.tmp, "train.py")
        with open(cls.script, "w") as f:
            f.write(SCRIPT)
        cls.env = {k: v for k, v in os.environ.items() if not k.startswith("GOLDMINER_")}
        cls.env["PYTHONPATH"] = ""

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)


class RunTest(ScriptTest):
    """Unchanged scripts under `goldminer run --offload native`, beside stock."""

    def run_script(self, variant, *run_flags):
        argv = [PYTHON, self.script, self.root, variant]
        if run_flags:
            argv = [goldminer_binary(), "run", "--workers", "2", *run_flags, "--"] + argv
        proc = subprocess.run(argv, capture_output=True, text=True, env=self.env,
                              timeout=TIMEOUT_S, cwd=self.tmp)
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr

    def test_an_eval_transform_gives_stocks_batches_with_the_cut_on_and_off(self):
        self.same_as_stock("eval", ("on", "off"))

    def test_a_concat_dataset_of_folders_gives_stocks_batches(self):
        self.same_as_stock("concat", ("auto",))

    def test_a_distributed_sampler_in_a_batch_sampler_keeps_the_programs_batches(self):
        self.same_as_stock("sampler", ("auto",))

    def same_as_stock(self, variant, cuts):
        stock, _ = self.run_script(variant)
        for cut in cuts:
            native, stderr = self.run_script(variant, "--offload", "native", "--offload-cut", cut)
            self.assertNotIn("runs in exact mode", stderr)
            self.assertIn("--offload native: a DataLoader goldminer recognises", stderr)
            self.assertIn("1 DataLoader(s) on virtual workers (1 native)",
                          stderr.strip().splitlines()[-1])
            self.assertEqual(len(native), len(stock))
            for got, want in zip(native, stock):
                self.assertEqual(got["labels"], want["labels"], "the program's order")
                self.assertEqual((got["shape"], got["dtype"]), (want["shape"], want["dtype"]))
                diff = max(abs(a - b) for a, b in zip(got["images"], want["images"]))
                self.assertLess(diff, 1e-6, cut)

    def test_a_train_transform_is_the_programs_order_and_the_same_whatever_the_workers(self):
        stock, _ = self.run_script("train")
        one, _ = self.run_script("train", "--offload", "native", "--dataloader-workers", "1")
        three, _ = self.run_script("train", "--offload", "native", "--dataloader-workers", "3")
        self.assertEqual([b["labels"] for b in one], [b["labels"] for b in stock])
        self.assertEqual([(b["shape"], b["dtype"]) for b in one],
                         [(b["shape"], b["dtype"]) for b in stock])
        self.assertEqual(one, three, "each sample's draws are its own, not a worker's")
        self.assertNotEqual(one[0]["images"], one[3]["images"])
        self.assertNotEqual(one[:3], one[3:6], "each epoch draws anew")

    def test_a_dataloader_not_recognised_runs_exact_saying_why(self):
        with open(os.path.join(self.tmp, "jitter.py"), "w") as f:
            f.write(SCRIPT.replace("T.RandomHorizontalFlip()", "T.ColorJitter(0.2)"))
        base = [PYTHON, os.path.join(self.tmp, "jitter.py"), self.root, "train"]
        stock = subprocess.run(base, capture_output=True, text=True, env=self.env,
                               timeout=TIMEOUT_S)
        served = subprocess.run([goldminer_binary(), "run", "--workers", "2", "--offload",
                                 "native", "--"] + base, capture_output=True, text=True,
                                env=self.env, timeout=TIMEOUT_S, cwd=self.tmp)
        self.assertEqual(served.returncode, 0, served.stderr[-3000:])
        self.assertIn("runs in exact mode, not native: transform step 1 (ColorJitter): not one "
                      "of goldminer's ops", served.stderr)
        self.assertIn("1 DataLoader(s) on virtual workers,", served.stderr.strip().splitlines()[-1])
        self.assertEqual(served.stdout.strip().splitlines()[-1],
                         stock.stdout.strip().splitlines()[-1], "exact: stock's batches")


class ProfilePlanTest(ScriptTest):
    """`goldminer profile --offload native` prices a recognised DataLoader on the
    engine (the hook's "N" line), `plan` sizes the workers by it, and `run --plan`
    runs it native."""

    def goldminer(self, *argv):
        proc = subprocess.run([goldminer_binary(), *argv], capture_output=True, text=True,
                              env=self.env, timeout=TIMEOUT_S, cwd=self.tmp)
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        return proc

    def profile(self, script, *flags):
        out = os.path.join(self.tmp, "profile.json")
        proc = self.goldminer("profile", *flags, "--no-db", "-o", out, "--warmup-steps", "2",
                              "--", PYTHON, script, self.root, "train")
        with open(out) as f:
            return json.load(f)["trainer"], proc.stdout

    def test_a_recognised_dataloader_is_priced_planned_and_run_on_the_engine(self):
        stock, _ = self.profile(self.script)
        self.assertNotIn("native", stock, "priced only when asked")
        trainer, text = self.profile(self.script, "--offload", "native")
        native = trainer["native"]
        self.assertEqual(native["samples"], 12)  # its 12 photos, each made once
        self.assertGreater(native["cpu_s_per_sample"], 0)
        self.assertGreater(native["cut_cpu_s_per_sample"], 0)  # (their ratio is this CPU's)
        self.assertEqual(native["bytes_per_sample"], 3 * 48 * 48 * 4)  # float32
        self.assertEqual(native["cut_bytes_per_sample"], 3 * 48 * 48)  # uint8
        self.assertNotIn("not_native", trainer)
        self.assertIn("native engine (--offload native): ", text)
        self.assertIn("what `goldminer plan` sizes data workers by", text.split("native engine")[1])

        plan_path = os.path.join(self.tmp, "plan.json")
        self.goldminer("plan", "--profile", os.path.join(self.tmp, "profile.json"), "--no-db",
                       "-o", plan_path)
        with open(plan_path) as f:
            plan = json.load(f)
        self.assertEqual(plan["run"]["offload"], "native")
        self.assertGreaterEqual(plan["run"]["dataloader_workers"], 1)
        self.assertTrue(plan["notes"][0].startswith("an unchanged program on goldminer's native "
                                                    "engine"), plan["notes"][0])
        proc = self.goldminer("run", "--plan", plan_path, "--no-db")
        self.assertIn("(1 native)", proc.stderr.strip().splitlines()[-1])

    def test_a_dataloader_not_recognised_is_named_with_why(self):
        jitter = os.path.join(self.tmp, "jitter.py")
        with open(jitter, "w") as f:
            f.write(SCRIPT.replace("T.RandomHorizontalFlip()", "T.ColorJitter(0.2)"))
        trainer, text = self.profile(jitter, "--offload", "native")
        self.assertNotIn("native", trainer)
        self.assertEqual(trainer["not_native"],
                         ["a DataLoader of ImageFolder: transform step 1 (ColorJitter): not one "
                          "of goldminer's ops"])
        self.assertIn("not native: a DataLoader of ImageFolder: transform step 1", text)


if __name__ == "__main__":
    unittest.main()
