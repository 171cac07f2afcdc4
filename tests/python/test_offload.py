"""Tests of goldminer/offload.py: unchanged torch programs, run by /usr/bin/python3
once stock and once with goldminer's hook ($GOLDMINER_OFFLOAD=local, the hook's
directory first on PYTHONPATH, as `goldminer run` sets them), must print the same
SHA-256 of every batch. Real photos (tests/data/engine), torchvision's ImageFolder
and transforms, Debian's python3-lmdb. Nothing here depends on speed. Run:
/usr/bin/python3 -m unittest discover -s tests/python
"""

import copy
import io
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest

import scope

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
HOOK_DIR = os.path.join(ROOT, "python", "goldminer", "_profile_hook")
PHOTOS = os.path.join(ROOT, "tests", "data", "engine")
PYTHON = os.environ.get("GOLDMINER_TEST_PYTHON", "/usr/bin/python3")  # the torch under test
TIMEOUT_S = 300  # a program ends by then (each worker imports torch: seconds each)

# Prints {"epochs": [[sha256 of each batch, in order], ...]} on its last line.
# A batch's digest covers every tensor's dtype, shape and bytes, and the repr of
# everything else, in order.
COMMON = """
import hashlib, json, sys
import torch

def digest(batch):
    h = hashlib.sha256()
    def walk(x):
        if isinstance(x, torch.Tensor):
            h.update(str((x.dtype, tuple(x.shape))).encode())
            h.update(x.contiguous().numpy().tobytes())
        elif isinstance(x, dict):
            for k in sorted(x):
                h.update(repr(k).encode()); walk(x[k])
        elif isinstance(x, (list, tuple)):
            h.update(b"[")
            for v in x:
                walk(v)
            h.update(b"]")
        else:
            h.update(repr(x).encode())
    walk(batch)
    return h.hexdigest()

def run(loader, epochs):
    out = []
    for _ in range(epochs):
        out.append([digest(b) for b in loader])
    print(json.dumps({"epochs": out}))
"""

IMAGES = COMMON + """
import numpy as np
import torchvision
from torchvision import transforms

workers, persistent, noisy = int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4] == "1"

class Noisy(torchvision.datasets.ImageFolder):
    def __getitem__(self, i):
        x, y = super().__getitem__(i)
        return (x + float(np.random.rand()), y) if noisy else (x, y)

def seed_numpy(worker_id):  # a common worker_init_fn
    np.random.seed(torch.initial_seed() % 2**32)

t = transforms.Compose([transforms.RandomResizedCrop(24), transforms.RandomHorizontalFlip(),
                        transforms.ToTensor()])
g = torch.Generator()
g.manual_seed(11)
loader = torch.utils.data.DataLoader(
    Noisy(sys.argv[1], transform=t), batch_size=3, shuffle=True, generator=g,
    num_workers=workers, persistent_workers=persistent,
    worker_init_fn=seed_numpy if noisy else None)
run(loader, 2)
"""

DICTS = COMMON + """
import random
import re
from torch.utils.data import DataLoader, Dataset

class Texts(Dataset):
    def __len__(self):
        return 17
    def __getitem__(self, i):
        n = 1 + (i * 7) % 5
        return {"ids": torch.randint(0, 100, (n,)), "text": "sample %d %.6f" % (i, random.random()),
                "len": n}

def pad(items):  # a padding collate_fn, as text and speech scripts have
    longest = max(it["len"] for it in items)
    ids = torch.zeros(len(items), longest, dtype=torch.long)
    for row, it in enumerate(items):
        ids[row, :it["len"]] = it["ids"]
    return {"ids": ids, "text": [it["text"] for it in items],
            "lens": torch.tensor([it["len"] for it in items])}

g = torch.Generator()
g.manual_seed(5)
loader = DataLoader(Texts(), batch_size=4, shuffle=True, generator=g, num_workers=2,
                    collate_fn=lambda items: pad(items))  # a lambda travels too
run(loader, 2)
"""

ITERABLE = COMMON + """
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

class Shards(IterableDataset):
    def __iter__(self):
        info = get_worker_info()
        for i in range(info.id, 23, info.num_workers):  # each worker its shard
            yield torch.tensor([i, info.id, info.num_workers]), torch.rand(2)

torch.manual_seed(3)  # the base seed comes from the global generator here
run(DataLoader(Shards(), batch_size=4, num_workers=3), 2)
"""

LMDB = COMMON + """
import lmdb
from torch.utils.data import DataLoader, Dataset

class Records(Dataset):
    def __init__(self, path):
        self.env = lmdb.open(path, map_size=1 << 20)  # opened eagerly: cannot travel
    def __len__(self):
        return 9
    def __getitem__(self, i):
        return torch.tensor([i]) * torch.rand(1)

torch.manual_seed(2)  # the base seed: a fallback must draw it as stock does
run(DataLoader(Records(sys.argv[1]), batch_size=2, num_workers=2), 2)
"""

OPEN_FILE = COMMON + """
from torch.utils.data import DataLoader, Dataset

class Lines(Dataset):
    def __init__(self, path):
        self.meta = {"source": open(path, "rb")}
    def __len__(self):
        return 5
    def __getitem__(self, i):
        return torch.tensor([i])

run(DataLoader(Lines(sys.argv[1]), batch_size=2, num_workers=2), 1)
"""

RAISES = COMMON + """
from torch.utils.data import DataLoader, Dataset

class Bad(Dataset):
    def __len__(self):
        return 10
    def __getitem__(self, i):
        if i == 7:
            raise KeyError("row 7 is corrupt")
        return torch.tensor([i])

try:
    for _ in DataLoader(Bad(), batch_size=2, num_workers=2):
        pass
except KeyError as e:
    print(json.dumps({"type": type(e).__name__, "message": str(e)}))
"""

# Batches of the program's own types: a dataclass and a namedtuple of the
# script, a class of a module beside it (batchmod.py, written by the test), a
# user exception; tensors torch pickles itself (bfloat16, requires_grad), numpy
# arrays and scalars, an OrderedDict. The trainer gets its own classes back.
TYPES = COMMON + """
import collections, dataclasses
import numpy as np
from torch.utils.data import DataLoader, Dataset
import batchmod

Pair = collections.namedtuple("Pair", "left right")

@dataclasses.dataclass
class Batch:
    pixels: torch.Tensor
    half: torch.Tensor
    extra: object

class Items(Dataset):
    def __len__(self):
        return 9
    def __getitem__(self, i):
        return i

def collate(items):
    x = torch.rand(len(items), 3)
    extra = collections.OrderedDict(pair=Pair(np.arange(len(items)) * np.random.rand(),
                                              np.float32(items[0])),
                                    tag=batchmod.Tag(sum(items)))
    return Batch(x, x.to(torch.bfloat16).requires_grad_(), extra)

def flat(b):
    assert type(b) is Batch and type(b.extra["pair"]) is Pair, type(b)
    assert type(b.extra["tag"]) is batchmod.Tag
    return [b.pixels, b.half.detach().view(torch.int16), b.half.requires_grad,
            torch.from_numpy(b.extra["pair"].left), repr(b.extra["pair"].right),
            b.extra["tag"].n]

torch.manual_seed(4)
loader = DataLoader(Items(), batch_size=2, num_workers=2, collate_fn=collate)
print(json.dumps({"epochs": [[digest(flat(b)) for b in loader] for _ in range(2)]}))
"""

BATCHMOD = """
class Tag:
    def __init__(self, n):
        self.n = n
"""

# A batch whose pickle calls a function or class of the standard library when
# loaded (what a hostile data worker would send): the trainer must not call it.
HOSTILE = COMMON + """
import os, sys
from torch.utils.data import DataLoader, Dataset

class Evil:
    def __init__(self, how):
        self.how = how
    def __reduce__(self):
        mark = os.path.abspath("pwned-" + self.how)
        if self.how == "system":
            return os.system, ("touch " + mark,)
        import subprocess
        return subprocess.Popen, (["touch", mark],)

class Items(Dataset):
    def __init__(self, how):
        self.how = how
    def __len__(self):
        return 4
    def __getitem__(self, i):
        return Evil(self.how)

try:
    for _ in DataLoader(Items(sys.argv[1]), batch_size=None, num_workers=2):
        pass
    print(json.dumps({"error": None}))
except Exception as e:
    print(json.dumps({"error": str(e), "type": type(e).__name__}))
"""

# A batch type defined inside a function: it has no name a worker can send it by.
LOCAL_CLASS = COMMON + """
from torch.utils.data import DataLoader, Dataset

def make():
    class Box:
        def __init__(self, v):
            self.v = v
    return Box

class Items(Dataset):
    def __init__(self):
        self.box = make()
    def __len__(self):
        return 4
    def __getitem__(self, i):
        return self.box(torch.tensor([i]))

try:
    got = [b.v.tolist() for b in DataLoader(Items(), batch_size=None, num_workers=2)]
    print(json.dumps({"got": got}))
except Exception as e:
    print(json.dumps({"error": str(e)}))
"""

# A DataLoader with multiprocessing_context="spawn" (stock starts fresh
# interpreters, which import the script as __mp_main__).
SPAWN = COMMON + """
from torch.utils.data import DataLoader, Dataset

class Items(Dataset):
    def __len__(self):
        return 12
    def __getitem__(self, i):
        return torch.rand(2) + i

if __name__ == "__main__":
    torch.manual_seed(3)
    run(DataLoader(Items(), batch_size=3, shuffle=True, num_workers=2,
                   multiprocessing_context="spawn"), 2)
"""

# A script that moves to another directory (as Hydra does) and sets a variable
# before its loop: a stock worker inherits both; the run's keys are not in it.
CWD_ENV = COMMON + """
import os
from torch.utils.data import DataLoader, Dataset

class Items(Dataset):
    def __len__(self):
        return 6
    def __getitem__(self, i):
        with open("data.txt") as f:  # relative: the program's directory
            text = f.read().strip()
        return {"x": torch.rand(1) + i, "text": text, "aug": os.environ.get("AUG_MODE", "unset"),
                "key": "GOLDMINER_SECRET" in os.environ or "GOLDMINER_SECRET_FILE" in os.environ}

os.makedirs("inner", exist_ok=True)
with open("inner/data.txt", "w") as f:
    f.write("inner data")
os.chdir("inner")
os.environ["AUG_MODE"] = "strong"
torch.manual_seed(1)
run(DataLoader(Items(), batch_size=2, num_workers=2), 2)
"""

# A persistent_workers loader still alive when the program ends.
PERSISTENT_AT_EXIT = COMMON + """
from torch.utils.data import DataLoader, Dataset

class Items(Dataset):
    def __len__(self):
        return 8
    def __getitem__(self, i):
        return torch.rand(1) + i

torch.manual_seed(2)
loader = DataLoader(Items(), batch_size=2, num_workers=2, persistent_workers=True)
run(loader, 2)
"""

# A DataLoader whose error (if any) is printed: {"error": text or None}.
ANY_ERROR = COMMON + """
from torch.utils.data import DataLoader, Dataset

class Items(Dataset):
    def __len__(self):
        return 8
    def __getitem__(self, i):
        return torch.tensor([i])

try:
    list(DataLoader(Items(), batch_size=2, num_workers=2))
    print(json.dumps({"error": None}))
except Exception as e:
    print(json.dumps({"error": str(e)}))
"""

# Kills one of the program's virtual workers (none under stock) at batch 2.
KILL = """
import os, signal

def children(ppid):
    found = []
    for pid in sorted(os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[1] == str(ppid):
                    with open(f"/proc/{pid}/cmdline", "rb") as c:
                        found.append((int(pid), c.read()))
        except (OSError, IndexError, ValueError):
            continue
    return found

def vhosts():  # the goldminer._vhost processes serving this program: its own children
    # (offload "local"), else those of the data workers of the goldminer run it runs in
    mine = [pid for pid, cmd in children(os.getpid()) if b"goldminer._vhost" in cmd]
    if mine:
        return mine
    return [host for worker, cmd in children(os.getppid()) if b"worker" in cmd
            for host, hcmd in children(worker) if b"goldminer._vhost" in hcmd]

def kill_a_virtual_worker():  # a child of a goldminer._vhost
    for host in vhosts():
        for pid, _ in children(host):
            os.kill(pid, signal.SIGKILL)
            return

def kill_a_data_worker():  # under goldminer run: a data worker, its virtual workers with it
    # Every data worker has a warm goldminer._vhost; the one killed is one whose host has
    # forked virtual workers (serving this loader), not one that only waits.
    for pid, cmd in children(os.getppid()):
        if b"worker" in cmd and any(b"goldminer._vhost" in c and children(host)
                                    for host, c in children(pid)):
            os.kill(pid, signal.SIGKILL)
            return  # (none when run stock)

def run_killing(loader, epochs, kill=kill_a_virtual_worker):
    out = []
    for e in range(epochs):
        batches = []
        for n, b in enumerate(loader):
            batches.append(digest(b))
            if e == 0 and n == 2:
                kill()
        out.append(batches)
    print(json.dumps({"epochs": out}))
"""

KILLED = COMMON + KILL + """
from torch.utils.data import DataLoader, Dataset

class Noisy(Dataset):
    def __len__(self):
        return 40
    def __getitem__(self, i):
        return torch.rand(2) + i

g = torch.Generator()
g.manual_seed(9)
run_killing(DataLoader(Noisy(), batch_size=2, shuffle=True, generator=g, num_workers=2,
                       persistent_workers=sys.argv[1] == "1"), 2,
            kill_a_data_worker if sys.argv[2:] == ["data-worker"] else kill_a_virtual_worker)
"""

KILLED_ITERABLE = COMMON + KILL + """
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

class Shards(IterableDataset):
    def __iter__(self):
        info = get_worker_info()
        for i in range(info.id, 30, info.num_workers):
            yield torch.rand(2) + i

torch.manual_seed(4)
run_killing(DataLoader(Shards(), batch_size=3, num_workers=2), 2)
"""

CRASHES = COMMON + """
import os, signal
from torch.utils.data import DataLoader, Dataset

class Crashes(Dataset):
    def __len__(self):
        return 10
    def __getitem__(self, i):
        if i == 7:
            os.kill(os.getpid(), signal.SIGKILL)  # every time: a replacement cannot help
        return torch.tensor([i])

try:
    for _ in DataLoader(Crashes(), batch_size=2, num_workers=2):
        pass
    print(json.dumps({"error": None}))
except RuntimeError as e:
    print(json.dumps({"error": str(e)}))
"""

# The dataset's class is in a module of a folder the script adds to sys.path.
ELSEWHERE = COMMON + """
sys.path.insert(0, sys.argv[1])
from gm_elsewhere import Far
from torch.utils.data import DataLoader

g = torch.Generator()
g.manual_seed(8)
run(DataLoader(Far(), batch_size=3, shuffle=True, generator=g, num_workers=2), 2)
"""

# Where each sample was made: the command of the virtual worker's host's parent.
WHERE = COMMON + """
import os
from torch.utils.data import DataLoader, Dataset

class Where(Dataset):
    def __len__(self):
        return 4
    def __getitem__(self, i):
        with open(f"/proc/{os.getppid()}/stat") as f:
            grandparent = f.read().rsplit(")", 1)[1].split()[1]
        with open(f"/proc/{grandparent}/cmdline", "rb") as f:
            argv = f.read().split(b"\\0")
        return os.path.basename(argv[0].decode()) + " " + argv[1].decode()

print(json.dumps({"parents": [p for b in DataLoader(Where(), batch_size=2, num_workers=2)
                              for p in b]}))
"""

# An ImageFolder whose transform ends in steps that only widen the data (argv[2]:
# which), 2 epochs; "received": the image dtypes the trainer's part of a cut got
# (goldminer._cut.finish_cut: uint8 from a worker that cut, float32 from one
# that did not), none when the DataLoader is not cut.
CUT = COMMON + """
import torchvision
from torchvision import transforms as T

tail = {"normalize": [T.ToTensor(), T.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))],
        "pil": [T.PILToTensor(), T.ConvertImageDtype(torch.float32), T.Normalize((0.5,), (0.25,))],
        "plain": [T.ToTensor()]}[sys.argv[2]]
t = T.Compose([T.RandomResizedCrop(24), T.RandomHorizontalFlip()] + tail)
g = torch.Generator()
g.manual_seed(7)
loader = torch.utils.data.DataLoader(torchvision.datasets.ImageFolder(sys.argv[1], transform=t),
                                     batch_size=3, shuffle=True, generator=g, num_workers=2)
received = []
try:
    from goldminer import _cut
    finish = _cut.finish_cut
    def spy(batch, cut, pin):
        received.append(str(batch[0].dtype))
        return finish(batch, cut, pin)
    _cut.finish_cut = spy
except ImportError:  # stock
    pass
epochs = [[digest(b) for b in loader] for _ in range(2)]
print(json.dumps({"epochs": epochs, "received": sorted(set(received))}))
"""

# A loop that runs until it is interrupted, saying once that it loops.
FOREVER = """
import torch
from torch.utils.data import DataLoader, Dataset

class Count(Dataset):
    def __len__(self):
        return 1 << 30
    def __getitem__(self, i):
        return torch.tensor([i])

for n, batch in enumerate(DataLoader(Count(), batch_size=4, num_workers=2)):
    if n == 0:
        print("looping", flush=True)
"""

# Batches big enough for shared memory (2 x 16384 float32 a batch, random).
BIG = COMMON + """
from torch.utils.data import DataLoader, Dataset

class Big(Dataset):
    def __len__(self):
        return 40
    def __getitem__(self, i):
        return torch.rand(16384)

g = torch.Generator()
g.manual_seed(4)
run(DataLoader(Big(), batch_size=2, shuffle=True, generator=g, num_workers=2), 2)
"""

# A trainer whose channels claim to share the data workers' host.
LIAR = COMMON + """
from torch.utils.data import DataLoader, Dataset
from goldminer import _channels

init = _channels.RemoteChan.__init__
def lying_init(self, *args):
    init(self, *args)
    self.same_host = True
_channels.RemoteChan.__init__ = lying_init

class Big(Dataset):
    def __len__(self):
        return 4
    def __getitem__(self, i):
        return torch.rand(16384)

try:
    list(DataLoader(Big(), batch_size=2, num_workers=1))
    print(json.dumps({"error": None}))
except RuntimeError as e:
    print(json.dumps({"error": str(e)}))
"""

# Each sample spins 10 ms of CPU; prints the names of the processes above the
# workers that made the batches of argv[1] epochs.
BUSY = """
import json, os, sys, time
import torch
from torch.utils.data import DataLoader, Dataset

class Busy(Dataset):
    def __len__(self):
        return 64
    def __getitem__(self, i):
        start = time.process_time()
        while time.process_time() - start < 0.010:
            pass
        with open(f"/proc/{os.getppid()}/stat") as f:
            grandparent = f.read().rsplit(")", 1)[1].split()[1]
        with open(f"/proc/{grandparent}/cmdline", "rb") as f:
            argv = f.read().split(b"\\0")
        return torch.zeros(16), os.path.basename(argv[0].decode()) + " " + argv[1].decode()

parents = set()
for _ in range(int(sys.argv[1])):
    for x, p in DataLoader(Busy(), batch_size=4, num_workers=2):
        parents |= set(p)
print(json.dumps({"parents": sorted(parents)}))
"""

SUBCLASS = COMMON + """
from torch.utils.data import DataLoader, Dataset

class Items(Dataset):
    def __len__(self):
        return 6
    def __getitem__(self, i):
        return torch.tensor([i])

class Mine(DataLoader):  # its own iterator: left alone
    def __iter__(self):
        return super().__iter__()

run(Mine(Items(), batch_size=2, num_workers=2), 1)
run(DataLoader(Items(), batch_size=2, num_workers=0), 1)
"""


def goldminer_binary():
    """The binary under test: $GOLDMINER_BINARY (ctest sets it), else the build tree's."""
    path = os.environ.get("GOLDMINER_BINARY") or os.path.join(ROOT, "build", "cmd", "goldminer")
    if not os.access(path, os.X_OK):
        raise AssertionError(f"no goldminer binary at {path}: build it (scripts/build.sh) or "
                             f"set GOLDMINER_BINARY")
    return path


def tiny_pipeline(folder, images):
    """A pipeline for `goldminer run` around a program whose DataLoader is offloaded
    (the run needs one; the program does not read it)."""
    path = os.path.join(folder, "tiny.json")
    with open(path, "w") as f:
        json.dump({"version": 1, "source": {"type": "files", "root": images,
                                            "pattern": "**/*.jpg", "label": "parent_dir"},
                   "stages": [{"op": "decode_jpeg"}, {"op": "resize", "size": [8, 8]},
                              {"op": "to_tensor", "layout": "CHW", "dtype": "uint8"}],
                   "batch": {"size": 4}, "seed": 1}, f)
    return path


# Each rank's DataLoader over a DistributedSampler, its batches' digests written
# to OUT % rank (RANK and WORLD_SIZE from the environment, as `goldminer run
# --world-size` sets them).
RANKS = COMMON + """
import os
from torch.utils.data import DataLoader, Dataset, DistributedSampler

class Noisy(Dataset):
    def __len__(self):
        return 24
    def __getitem__(self, i):
        return torch.rand(3) + i  # from the worker's seed

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
sampler = DistributedSampler(Noisy(), num_replicas=world, rank=rank, shuffle=True, seed=7)
generator = torch.Generator()
generator.manual_seed(5)
loader = DataLoader(Noisy(), batch_size=3, sampler=sampler, num_workers=2, generator=generator)
out = []
for epoch in range(2):
    sampler.set_epoch(epoch)
    out.append([digest(b) for b in loader])
with open(sys.argv[1] % rank, "w") as f:
    json.dump(out, f)
"""


# A DataLoader with a timeout whose dataset takes longer: torch's error, in as
# long as stock takes to give it (the run's wait is the DataLoader's own).
TIMEOUT = r'''
import json, time
from torch.utils.data import DataLoader, Dataset

class Slow(Dataset):
    def __len__(self):
        return 8
    def __getitem__(self, i):
        time.sleep(5)
        return i

try:
    for batch in DataLoader(Slow(), batch_size=2, num_workers=2, timeout=2):
        pass
    print(json.dumps({"error": None}))
except RuntimeError as e:
    print(json.dumps({"error": str(e)}))
'''


# One folder for every class of programs below (the programs, and 12 photos in two
# classes), so that a program and its arguments are the same in each class and
# stock's output, computed once, serves them all (STOCK).
_FOLDER = []


def shared_folder():
    if not _FOLDER:
        tmp = tempfile.mkdtemp(prefix="goldminer-offload-test-")
        images = os.path.join(tmp, "images")
        photos = sorted(f for f in os.listdir(PHOTOS) if f.startswith("photo"))
        for n, name in enumerate(photos * 2):  # 12 photos, two classes
            d = os.path.join(images, "ab"[n % 2])
            os.makedirs(d, exist_ok=True)
            shutil.copy(os.path.join(PHOTOS, name), os.path.join(d, f"{n}.jpg"))
        _FOLDER.extend([tmp, images])
    return _FOLDER


def tearDownModule():
    if _FOLDER:
        shutil.rmtree(_FOLDER[0], ignore_errors=True)


# Stock's output of each program, by its source, arguments and environment: the
# programs are deterministic (every test below says the served output equals it),
# so each runs stock once for all the classes that serve it, not once per class
# (each run imports torch: seconds of CPU the suite pays).
STOCK = {}


class OffloadTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp, cls.images = shared_folder()

    TRANSPORT = "local"
    RUN_FLAGS = ()  # more flags of `goldminer run` (transport "workers")
    ENV = {}  # more of the program's (or its run's) environment
    # Transport "workers": give `goldminer run` a pipeline file beside the program
    # (which does not read it); without one the run serves only the DataLoaders,
    # the program unchanged.
    PIPELINE = False

    # Data workers of `goldminer run` (transport "workers"): one, as each starts a
    # Python host that imports torch; two for the tests named in TWO_DATA_WORKERS,
    # whose virtual workers spread over both or which count them.
    TWO_DATA_WORKERS = ()

    def program(self, source, *args, offload):
        # Stock runs without the hook: goldminer's variables in ENV (the cut's) are
        # not theirs, so stock's output is the same whatever the class set.
        extra = {k: v for k, v in self.ENV.items() if offload or not k.startswith("GOLDMINER_")}
        key = (source, tuple(map(str, args)), tuple(sorted(extra.items())))
        if not offload and key in STOCK:
            return copy.deepcopy(STOCK[key])
        path = os.path.join(self.tmp, "train.py")
        with open(path, "w") as f:
            f.write(source)
        env = {k: v for k, v in os.environ.items() if not k.startswith("GOLDMINER_")}
        env["PYTHONPATH"] = ""
        env.update(extra)
        argv = [PYTHON, path, *map(str, args)]
        if offload and self.TRANSPORT == "workers":
            # The DataLoader's work on a run's data workers: run's default --offload exact
            # sets the hook and the transport.
            pipeline = ["--pipeline", tiny_pipeline(self.tmp, self.images)] if self.PIPELINE else []
            workers = 2 if self._testMethodName in self.TWO_DATA_WORKERS else 1
            argv = [goldminer_binary(), "run", "--workers", str(workers), *pipeline,
                    *self.RUN_FLAGS, "--"] + argv
        elif offload:
            env["PYTHONPATH"] = HOOK_DIR
            env["GOLDMINER_OFFLOAD"] = self.TRANSPORT
        proc = subprocess.run(argv, capture_output=True, text=True,
                              env=env, timeout=TIMEOUT_S, cwd=self.tmp)
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        lines = proc.stdout.strip().splitlines()
        self.assertTrue(lines, proc.stderr[-3000:])
        out = json.loads(lines[-1]), proc.stderr
        if not offload:
            STOCK[key] = copy.deepcopy(out)
        return out

    def same_as_stock(self, source, *args):
        stock, _ = self.program(source, *args, offload=False)
        served, stderr = self.program(source, *args, offload=True)
        self.assertNotIn("runs on stock local workers", stderr)
        self.assertEqual([len(e) for e in served["epochs"]], [len(e) for e in stock["epochs"]])
        self.assertEqual(served, stock)
        self.assertNotEqual(stock["epochs"][0], stock["epochs"][-1])  # the epochs differ
        return stderr

    def test_image_folder_with_random_transforms_is_bit_identical_with_two_workers(self):
        self.same_as_stock(IMAGES, self.images, 2, 0, 0)

    def test_three_persistent_workers_are_bit_identical(self):
        self.same_as_stock(IMAGES, self.images, 3, 1, 0)

    def test_a_worker_init_fn_that_seeds_numpy_is_bit_identical(self):
        self.same_as_stock(IMAGES, self.images, 2, 0, 1)

    def test_dicts_strings_and_a_padding_collate_fn_lambda_are_bit_identical(self):
        self.same_as_stock(DICTS)

    def test_the_workers_see_the_programs_directory_and_environment_but_no_key(self):
        with open(os.path.join(self.tmp, "data.txt"), "w") as f:
            f.write("the launch directory's")  # what a worker in the wrong place would read
        # The digests cover each item's text, variable and key flag: stock's are
        # "inner data", "strong" and False.
        self.same_as_stock(CWD_ENV)

    def test_a_persistent_loader_alive_at_the_end_ends_quietly_with_nothing_made_again(self):
        # Its virtual workers end with the program: no loss to make good (that
        # took 5 s and said so twice, for nothing).
        stderr = self.same_as_stock(PERSISTENT_AT_EXIT)
        self.assertNotIn("a new one goes on", stderr)
        self.assertNotIn("did not exit", stderr)

    def test_a_loaders_timeout_raises_torchs_error_as_stock_does(self):
        stock, _ = self.program(TIMEOUT, offload=False)
        served, _ = self.program(TIMEOUT, offload=True)
        self.assertIn("timed out after 2 seconds", stock["error"])
        self.assertEqual(served, stock)

    def cut(self, mode):
        """The cut for the next programs: --offload-cut under `goldminer run`."""
        if self.TRANSPORT == "workers":
            self.RUN_FLAGS = ("--offload-cut", mode)
        else:
            self.ENV = {"GOLDMINER_OFFLOAD_CUT": mode}

    def test_an_image_folder_cut_before_its_widening_steps_gives_stock_batches(self):
        # The workers send uint8 images; the trainer applies ToTensor's scaling and
        # Normalize as it receives each batch: stock's bytes, with the cut and without.
        for variant, modes in (("normalize", ("on", "off")), ("pil", ("on",)),
                               ("plain", ("on",))):
            stock, _ = self.program(CUT, self.images, variant, offload=False)
            for mode in modes:
                self.cut(mode)
                served, stderr = self.program(CUT, self.images, variant, offload=True)
                self.assertEqual(served["epochs"], stock["epochs"], (variant, mode, stderr[-2000:]))
                self.assertEqual(served["received"], ["torch.uint8"] if mode == "on" else [],
                                 (variant, mode))

    def test_a_spawn_context_is_bit_identical(self):
        self.same_as_stock(SPAWN)

    def test_an_iterable_dataset_sharded_by_worker_info_is_bit_identical(self):
        stock, _ = self.program(ITERABLE, offload=False)
        served, _ = self.program(ITERABLE, offload=True)
        self.assertEqual(served, stock)
        self.assertEqual(len(stock["epochs"][0]), 6)  # shards of 8, 8, 7 items: 2 batches each

    def test_a_module_from_a_folder_the_script_adds_to_sys_path_is_found_there(self):
        far = tempfile.mkdtemp(prefix="goldminer-offload-far-")  # not under the script's folder
        self.addCleanup(shutil.rmtree, far, True)
        with open(os.path.join(far, "gm_elsewhere.py"), "w") as f:
            f.write("import torch\nclass Far(torch.utils.data.Dataset):\n"
                    "    def __len__(self):\n        return 11\n"
                    "    def __getitem__(self, i):\n        return torch.rand(2) + i\n")
        self.same_as_stock(ELSEWHERE, far)

    def test_an_lmdb_environment_falls_back_naming_the_attribute(self):
        db = os.path.join(self.tmp, "db")
        stock, _ = self.program(LMDB, db, offload=False)
        served, stderr = self.program(LMDB, db, offload=True)
        self.assertIn("DataLoader of Records runs on stock local workers: dataset.env cannot "
                      "travel to the data workers", stderr)
        self.assertIn("open it lazily, in __getitem__ or worker_init_fn", stderr)
        self.assertEqual(stderr.count("runs on stock local workers"), 1)  # once, not per epoch
        self.assertEqual(served, stock)

    def test_an_open_file_in_a_dict_falls_back_naming_the_path(self):
        path = os.path.join(self.tmp, "lines.txt")
        with open(path, "w") as f:
            f.write("x\n")
        served, stderr = self.program(OPEN_FILE, path, offload=True)
        self.assertIn("dataset.meta['source'] cannot travel", stderr)
        stock, _ = self.program(OPEN_FILE, path, offload=False)
        self.assertEqual(served, stock)

    def test_an_exception_in_getitem_has_the_stock_type_and_message(self):
        stock, _ = self.program(RAISES, offload=False)
        served, _ = self.program(RAISES, offload=True)
        self.assertEqual(served["type"], "KeyError")
        self.assertEqual(served, stock)
        self.assertIn("Caught KeyError in DataLoader worker process 1", served["message"])
        self.assertIn("row 7 is corrupt", served["message"])
        self.assertIn("Traceback", served["message"])  # the remote one

    def test_batches_of_the_programs_own_types_come_back_as_its_classes(self):
        with open(os.path.join(self.tmp, "batchmod.py"), "w") as f:
            f.write(BATCHMOD)
        self.same_as_stock(TYPES)

    def test_a_batch_that_would_run_a_program_when_loaded_is_refused_naming_it(self):
        for how, name in (("system", "posix.system"), ("popen", "subprocess.Popen")):
            mark = os.path.join(self.tmp, "pwned-" + how)
            served, _ = self.program(HOSTILE, how, offload=True)
            self.assertFalse(os.path.exists(mark), f"{name} ran in the trainer")
            self.assertEqual(served["type"], "Refused", served)
            self.assertIn(f"a virtual DataLoader worker sent {name}, which goldminer does not "
                          f"load from a worker", served["error"])
            self.assertIn("GOLDMINER_TRUST_WORKERS=1", served["error"])

    def test_a_class_defined_in_a_function_is_refused_and_loads_when_workers_are_trusted(self):
        served, _ = self.program(LOCAL_CLASS, offload=True)
        self.assertIn("a virtual DataLoader worker sent __main__.Box (no class of that name at the "
                      "top level of its module in the trainer", served.get("error", ""))
        self.ENV = dict(self.ENV, GOLDMINER_TRUST_WORKERS="1")
        try:
            served, _ = self.program(LOCAL_CLASS, offload=True)
        finally:
            del self.ENV["GOLDMINER_TRUST_WORKERS"]
        self.assertEqual(served, {"got": [[0], [1], [2], [3]]})

    def test_after_a_kill_9_of_a_worker_the_batches_are_still_bit_identical(self):
        stderr = self.same_as_stock(KILLED, 0)
        self.assertIn("virtual DataLoader worker", stderr)
        self.assertIn("was killed by signal 9; a new one goes on from its last result", stderr)

    def test_after_a_kill_9_of_a_persistent_worker_the_batches_are_still_bit_identical(self):
        stderr = self.same_as_stock(KILLED, 1)
        self.assertIn("was killed by signal 9; a new one goes on", stderr)

    def test_after_a_kill_9_an_iterable_replica_replays_and_stays_bit_identical(self):
        stderr = self.same_as_stock(KILLED_ITERABLE)
        self.assertIn("was killed by signal 9; a new one goes on", stderr)

    def test_a_worker_that_dies_on_every_try_is_an_error_naming_it(self):
        served, stderr = self.program(CRASHES, offload=True)
        self.assertIsNotNone(served["error"])
        self.assertIn("virtual DataLoader worker", served["error"])
        self.assertIn("was killed by signal 9 (restarted 3 times)", served["error"])
        self.assertEqual(stderr.count("a new one goes on"), 3)

    def test_subclasses_with_their_own_iterator_and_zero_workers_are_left_alone(self):
        stock, _ = self.program(SUBCLASS, offload=False)
        served, stderr = self.program(SUBCLASS, offload=True)
        self.assertIn("DataLoader of Items runs on stock local workers: its class has its own "
                      "iterator", stderr)
        self.assertEqual(stderr.count("runs on stock local workers"), 1)  # not for num_workers=0
        self.assertEqual(served, stock)


class WorkersTransportTest(OffloadTest):
    """The same programs under `goldminer run --workers 1` (2 where a test says so)
    with $GOLDMINER_OFFLOAD=workers: each virtual worker is a process under one of
    the run's data workers (worker/virtual_workers.h), reached over the data plane."""

    TRANSPORT = "workers"
    TWO_DATA_WORKERS = (
        "test_image_folder_with_random_transforms_is_bit_identical_with_two_workers",
        "test_on_this_host_the_batches_come_in_shared_memory_and_over_tcp_without_it",
        "test_after_a_kill_9_of_a_data_worker_the_batches_are_still_bit_identical",
        "test_a_run_says_one_line_as_it_starts_and_one_as_it_ends_and_v_says_more",
    )

    def test_the_automatic_cut_is_made_where_batches_cross_tcp_only(self):
        stock, _ = self.program(CUT, self.images, "normalize", offload=False)
        self.cut("auto")  # the default: on this host, the batches come in shared memory
        served, _ = self.program(CUT, self.images, "normalize", offload=True)
        self.assertEqual(served, dict(stock, received=["torch.float32"]))  # not cut there
        self.ENV = {"GOLDMINER_SAME_HOST": "off"}  # the workers look remote: TCP, bytes
        served, _ = self.program(CUT, self.images, "normalize", offload=True)
        self.assertEqual(served, dict(stock, received=["torch.uint8"]))

    def test_the_virtual_workers_run_under_the_data_workers(self):
        served, stderr = self.program(WHERE, offload=True)
        self.assertEqual(served["parents"], ["goldminer worker"] * 4, stderr[-2000:])

    def test_on_this_host_the_batches_come_in_shared_memory_and_over_tcp_without_it(self):
        # 20 batches of 2 x 64 KiB float32: each result's buffers in a memfd.
        self.RUN_FLAGS = ("-v",)  # each data worker's last line counts them
        shared = self.same_as_stock(BIG)
        counts = [int(n) for n in re.findall(r"(\d+) of their results in shared memory", shared)]
        self.assertEqual(len(counts), 2, shared[-2000:])  # one line per data worker
        self.assertEqual(sum(counts), 20 * 2, shared[-2000:])  # two epochs
        self.ENV = {"GOLDMINER_SAME_HOST": "off"}  # the workers look remote: TCP, bytes
        stock, _ = self.program(BIG, offload=False)
        served, tcp = self.program(BIG, offload=True)
        self.assertEqual(served, stock)
        self.assertEqual(re.findall(r"(\d+) of their results in shared memory", tcp), ["0", "0"])

    def test_a_virtual_worker_that_passes_a_descriptor_to_another_host_is_ended(self):
        # The trainer, over TCP (as from another host), tells its virtual workers
        # that it shares their host: they pass memfds, which cannot go on.
        self.ENV = {"GOLDMINER_SAME_HOST": "off"}
        served, stderr = self.program(LIAR, offload=True)
        # Each of the 4 tries is ended at its first memfd; the trainer sees it killed,
        # or its stream cut inside the frame before (where the relay's read ended).
        self.assertIn("(restarted 3 times)", served["error"] or "", stderr)
        self.assertEqual(stderr.count("passed a descriptor for a trainer on another host: it "
                                      "is ended"), 4, stderr)

    def test_a_data_worker_with_another_torch_is_refused_naming_both_versions(self):
        # The suite's other interpreter (Debian's torch 1.13 or the pinned 2.x) on
        # the data workers ($GOLDMINER_PYTHON), this one in the trainer.
        other = os.environ.get("GOLDMINER_TEST_OTHER_PYTHON", "")
        self.assertTrue(os.access(other, os.X_OK),
                        f"GOLDMINER_TEST_OTHER_PYTHON={other!r}: no interpreter there "
                        f"(scripts/install-torch2.sh installs the torch 2.x one)")
        version = {}
        for python in (PYTHON, other):
            version[python] = subprocess.run(
                [python, "-c", "import torch; print(torch.__version__)"], capture_output=True,
                text=True, check=True, timeout=TIMEOUT_S).stdout.strip()
        self.assertNotEqual(version[PYTHON], version[other])
        self.ENV = dict(self.ENV, GOLDMINER_PYTHON=other)
        try:
            served, _ = self.program(ANY_ERROR, offload=True)
        finally:
            del self.ENV["GOLDMINER_PYTHON"]
        self.assertIn(f"the trainer has torch {version[PYTHON]}, this worker {version[other]}: "
                      f"install the same version on every node", served["error"] or "")

    def test_after_a_kill_9_of_a_data_worker_the_batches_are_still_bit_identical(self):
        stderr = self.same_as_stock(KILLED, 0, "data-worker")
        self.assertIn("lost its data worker", stderr)
        self.assertIn("a new one goes on from its last result", stderr)

    def test_a_run_says_one_line_as_it_starts_and_one_as_it_ends_and_v_says_more(self):
        _, stderr = self.program(WHERE, offload=True)
        ours = [line for line in stderr.splitlines() if line.startswith("goldminer")]
        self.assertEqual(len(ours), 2, stderr)
        self.assertRegex(ours[0], r"^goldminer: run \S+: coordinator at \S+, 2 workers, "
                                  r"1 trainer rank\(s\); no --pipeline")
        self.assertRegex(ours[1], r"^goldminer: run \S+ succeeded")
        self.RUN_FLAGS = ("-v",)  # today's detail: the workers' registrations and last words
        _, stderr = self.program(WHERE, offload=True)
        self.assertEqual(len(re.findall(r"coordinator: worker \d+ registered", stderr)), 2, stderr)
        self.assertEqual(len(re.findall(r"worker \S+: sent \d+ batches", stderr)), 2, stderr)

    def run_argv(self, *program):
        return [goldminer_binary(), "run", "--workers", "2", "--no-db", "--", PYTHON, *program]

    def run_env(self):
        env = {k: v for k, v in os.environ.items() if not k.startswith("GOLDMINER_")}
        env["PYTHONPATH"] = ""
        return env

    def test_a_trainer_that_fails_has_the_last_word(self):
        proc = subprocess.run(self.run_argv("missing.py"), capture_output=True, text=True,
                              env=self.run_env(), timeout=TIMEOUT_S, cwd=self.tmp)
        self.assertEqual(proc.returncode, 2, proc.stderr)  # Python's, for a missing script
        lines = proc.stderr.strip().splitlines()
        self.assertIn("missing.py", lines[-1], proc.stderr)
        self.assertIn("No such file or directory", lines[-1], proc.stderr)
        self.assertEqual(len([x for x in lines if x.startswith("goldminer")]), 1, proc.stderr)

    def test_ctrl_c_ends_with_the_trainers_traceback_only_and_status_130(self):
        import pty
        import time
        path = os.path.join(self.tmp, "forever.py")
        with open(path, "w") as f:
            f.write(FOREVER)
        argv, env = self.run_argv(path), self.run_env()
        pid, fd = pty.fork()  # a terminal, whose Ctrl-C goes to its foreground group
        if pid == 0:
            try:
                os.chdir(self.tmp)
                os.execve(argv[0], argv, env)
            finally:
                os._exit(127)
        out = b""

        def read(until):
            nonlocal out
            deadline = time.monotonic() + TIMEOUT_S
            while time.monotonic() < deadline and (until is None or until not in out):
                try:
                    chunk = os.read(fd, 65536)
                except OSError:  # EIO: every process of the terminal closed it
                    return
                if not chunk:
                    return
                out += chunk

        try:
            read(b"looping")
            self.assertIn(b"looping", out)
            os.write(fd, b"\x03")
            read(None)
        finally:
            _, status = os.waitpid(pid, 0)
            os.close(fd)
        text = out.decode("utf-8", "replace")
        self.assertEqual(os.waitstatus_to_exitcode(status), 130, text)  # 128 + SIGINT
        # The trainer's, one report: a Ctrl-C that lands while Python handles an
        # exception of its own (os.environ.get's KeyError, queue.Empty) chains it.
        chained = text.count("During handling of the above exception")
        self.assertEqual(text.count("Traceback"), 1 + chained, text)
        self.assertNotIn("_vworker", text)
        self.assertIn("KeyboardInterrupt", text)
        self.assertNotIn("_vhost", text)
        self.assertNotIn("goldminer: warning", text)
        self.assertNotIn("goldminer: error", text)

    def test_dataloader_workers_gives_the_batches_of_that_many_stock_workers(self):
        stock3, _ = self.program(IMAGES, self.images, 3, 0, 0, offload=False)
        stock2, _ = self.program(IMAGES, self.images, 2, 0, 0, offload=False)
        self.assertNotEqual(stock2, stock3)  # the worker count decides the random draws
        self.RUN_FLAGS = ("--dataloader-workers", "3")
        served, stderr = self.program(IMAGES, self.images, 2, 0, 0, offload=True)
        self.assertEqual(served, stock3, stderr[-2000:])
        # A DataLoader with num_workers=0 is offloaded too, with the batches of 3 workers.
        served, stderr = self.program(IMAGES, self.images, 0, 0, 0, offload=True)
        self.assertEqual(served, stock3, stderr[-2000:])
        self.assertIn("1 DataLoader(s) on virtual workers, 0 on stock local workers", stderr)
        # Without the flag it stays in the program's process, counted and named.
        self.RUN_FLAGS = ()
        # (Its random crops draw from the program's unseeded generator: no two runs agree.)
        alone, stderr = self.program(IMAGES, self.images, 0, 0, 0, offload=True)
        self.assertEqual([len(e) for e in alone["epochs"]], [4, 4])
        self.assertIn("0 DataLoader(s) on virtual workers, 0 on stock local workers, 1 in the "
                      "trainer's process (num_workers=0; --dataloader-workers M offloads them)",
                      stderr)
        self.assertIn("--dataloader-workers M offloads them to M virtual workers", stderr)

    def test_two_ranks_with_a_distributed_sampler_each_get_the_stock_batches(self):
        path = os.path.join(self.tmp, "ranks.py")
        with open(path, "w") as f:
            f.write(RANKS)
        env = {k: v for k, v in os.environ.items() if not k.startswith("GOLDMINER_")}
        env["PYTHONPATH"] = ""
        stock = []
        for rank in range(2):
            out = os.path.join(self.tmp, "stock.%d.json")
            proc = subprocess.run([PYTHON, path, out], capture_output=True, text=True,
                                  env=dict(env, RANK=str(rank), WORLD_SIZE="2"),
                                  timeout=TIMEOUT_S, cwd=self.tmp)
            self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
            with open(out % rank) as f:
                stock.append(json.load(f))
        out = os.path.join(self.tmp, "served.%d.json")
        proc = subprocess.run([goldminer_binary(), "run", "--workers", "2", "--world-size", "2",
                               "--no-db", "--", PYTHON, path, out], capture_output=True,
                              text=True, env=env, timeout=TIMEOUT_S, cwd=self.tmp)
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        self.assertIn("2 DataLoader(s) on virtual workers, 0 on stock local workers", proc.stderr)
        for rank in range(2):
            with open(out % rank) as f:
                self.assertEqual(json.load(f), stock[rank], f"rank {rank}")
        self.assertNotEqual(stock[0], stock[1])

    def test_the_ranks_virtual_workers_spread_over_the_data_workers(self):
        path = os.path.join(self.tmp, "spread.py")
        with open(path, "w") as f:
            f.write(textwrap.dedent("""
                import json, os, sys
                from torch.utils.data import DataLoader, Dataset

                class Host(Dataset):  # the pid of the data worker above the virtual worker
                    def __len__(self):
                        return 2
                    def __getitem__(self, i):
                        with open(f"/proc/{os.getppid()}/stat") as f:
                            return int(f.read().rsplit(")", 1)[1].split()[1])

                hosts = sorted({int(p) for b in DataLoader(Host(), batch_size=1, num_workers=1)
                                for p in b})
                with open(sys.argv[1] % int(os.environ["RANK"]), "w") as f:
                    json.dump(hosts, f)
                """))
        env = {k: v for k, v in os.environ.items() if not k.startswith("GOLDMINER_")}
        env["PYTHONPATH"] = ""
        out = os.path.join(self.tmp, "spread.%d.json")
        proc = subprocess.run([goldminer_binary(), "run", "--workers", "2", "--world-size", "2",
                               "--no-db", "--", PYTHON, path, out], capture_output=True,
                              text=True, env=env, timeout=TIMEOUT_S, cwd=self.tmp)
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        hosts = []
        for rank in range(2):
            with open(out % rank) as f:
                hosts.append(json.load(f))
        self.assertEqual([len(h) for h in hosts], [1, 1], hosts)
        self.assertNotEqual(hosts[0], hosts[1], "both ranks' virtual worker 0 on one data worker")

    def test_runs_db_records_what_became_of_each_dataloader(self):
        db = os.path.join(self.tmp, "notes.db")
        if os.path.exists(db):
            os.remove(db)
        self.RUN_FLAGS = ("--db", db)
        self.program(WHERE, offload=True)
        path = os.path.join(self.tmp, "lines.txt")
        with open(path, "w") as f:
            f.write("x\n")
        self.program(OPEN_FILE, path, offload=True)
        import sqlite3
        with sqlite3.connect(db) as c:
            rows = c.execute("SELECT r.id, e.message FROM events e JOIN runs r ON e.run_id = r.id "
                             "WHERE e.kind = 'offload' ORDER BY e.id").fetchall()
            runs = [r for (r,) in c.execute("SELECT id FROM runs ORDER BY rowid")]
            # The served DataLoader's steps reach the run's time series (the hook
            # records them as stock: the client library loaded for the offload is
            # no goldminer.Loader).
            (rate,) = c.execute("SELECT max(value) FROM metrics WHERE run_id = ? AND "
                                "name = 'samples_per_s'", (runs[0],)).fetchone()
        self.assertEqual(len(runs), 2, rows)
        self.assertGreater(rate or 0, 0, "the run recorded no delivered sample")
        served = [m for r, m in rows if r == runs[0]]
        self.assertEqual(len(served), 1, rows)  # one line per DataLoader, not per epoch
        self.assertRegex(served[0], r"^rank 0: a DataLoader of Where runs its 2 worker\(s\) as "
                                    r"virtual workers on the data workers, exact mode "
                                    r"\([1-9][0-9]* KiB of dataset, collate_fn and "
                                    r"worker_init_fn shipped\)$")
        stock = [m for r, m in rows if r == runs[1]]
        self.assertEqual(len(stock), 1, rows)
        self.assertIn("rank 0: a DataLoader of Lines runs on stock local workers: "
                      "dataset.meta['source'] cannot travel", stock[0])

    def test_profile_plan_and_run_plan_serve_an_unchanged_program(self):
        path = os.path.join(self.tmp, "busy.py")
        with open(path, "w") as f:
            f.write(BUSY)
        env = {k: v for k, v in os.environ.items() if not k.startswith("GOLDMINER_")}
        env["PYTHONPATH"] = ""
        profile, plan = os.path.join(self.tmp, "busy-profile.json"), \
            os.path.join(self.tmp, "busy-plan.json")

        def goldminer(*args):
            proc = subprocess.run([goldminer_binary(), *args], capture_output=True, text=True,
                                  env=env, timeout=TIMEOUT_S, cwd=self.tmp)
            self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
            return proc

        goldminer("profile", "--steps", "16", "--warmup-steps", "2", "--no-db", "-o", profile,
                  "--", PYTHON, path, "3")
        with open(profile) as f:
            loader = json.load(f)["trainer"]["dataloader"]
        self.assertEqual(loader["workers"], 2)
        # Each sample spins 10 ms of CPU in its worker, whatever the machine; the
        # figure is read in clock ticks with batches in flight at both ends: half is
        # a floor.
        self.assertGreaterEqual(loader["cpu_s_per_sample"], 0.005)
        self.assertGreaterEqual(loader["bytes_per_sample"], 16 * 4)  # its float32 tensor
        out = goldminer("plan", "--profile", profile, "--no-db", "-o", plan).stdout
        self.assertIn("an unchanged program: its DataLoader's 2 worker process(es)", out)
        with open(plan) as f:
            self.assertEqual(json.load(f)["run"]["pipeline"], "")
        db = os.path.join(self.tmp, "busy.db")
        proc = goldminer("run", "--plan", plan, "--db", db, "--no-progress")
        self.assertEqual(json.loads(proc.stdout.strip().splitlines()[-1]),
                         {"parents": ["goldminer worker"]})
        # The virtual workers' CPU is the data workers': 3 epochs of 64 samples of
        # 10 ms each is 1.9 s; the time series may end before the last epoch's.
        import sqlite3
        with sqlite3.connect(db) as c:
            points = c.execute("SELECT t_s, value FROM metrics WHERE name = 'worker_cpus' "
                               "ORDER BY t_s").fetchall()
        cpu_s, prev = 0.0, 0.0
        for t, value in points:
            cpu_s += value * max(0.0, t - prev)
            prev = t
        self.assertGreaterEqual(cpu_s, 0.5, points)
        self.assertIn("DataLoader(s) on virtual workers, 0 on stock local workers", proc.stderr)
        self.assertNotIn("UserWarning", proc.stderr)  # no warning about this host's CPUs

    def test_with_a_pipeline_file_beside_the_dataloaders_they_are_served_too(self):
        self.PIPELINE = True
        served, stderr = self.program(WHERE, offload=True)
        self.assertEqual(served["parents"], ["goldminer worker"] * 4, stderr[-2000:])
        self.assertNotIn("no --pipeline", stderr)

    def test_without_a_pipeline_the_run_says_so_and_a_loader_is_refused_saying_why(self):
        path = os.path.join(self.tmp, "loader.py")
        with open(path, "w") as f:
            f.write("import goldminer\n"
                    "try:\n"
                    "    next(iter(goldminer.Loader(epochs=1)))\n"
                    "except Exception as e:\n"
                    "    print(e)\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith("GOLDMINER_")}
        proc = subprocess.run([goldminer_binary(), "run", "--workers", "1", "--", PYTHON, path],
                              capture_output=True, text=True, env=env, timeout=TIMEOUT_S,
                              cwd=self.tmp)
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        self.assertIn("no --pipeline: the workers serve only the trainer's torch DataLoaders",
                      proc.stderr)
        self.assertIn("this run has no pipeline", proc.stdout)
        self.assertIn("give --pipeline FILE", proc.stdout)

    def test_without_a_pipeline_offload_off_is_a_usage_error(self):
        env = {k: v for k, v in os.environ.items() if not k.startswith("GOLDMINER_")}
        proc = subprocess.run([goldminer_binary(), "run", "--offload", "off", "--", PYTHON, "-c",
                               "pass"], capture_output=True, text=True, env=env,
                              timeout=TIMEOUT_S, cwd=self.tmp)
        self.assertEqual(proc.returncode, 2, proc.stderr[-3000:])
        self.assertIn("run needs --pipeline FILE", proc.stderr)

    def test_offload_off_leaves_the_dataloader_stock(self):
        self.PIPELINE = True  # a run with --offload off needs one
        self.RUN_FLAGS = ("--offload", "off")
        served, stderr = self.program(WHERE, offload=True)
        self.assertEqual(set(served["parents"]), {"goldminer run"}, stderr[-2000:])
        self.assertNotIn("virtual", stderr)

    # Of OffloadTest's cases, those the data plane changes (the others test the
    # trainer's half, which is the same for both transports).
    test_three_persistent_workers_are_bit_identical = None
    test_a_worker_init_fn_that_seeds_numpy_is_bit_identical = None
    test_a_module_from_a_folder_the_script_adds_to_sys_path_is_found_there = None
    test_an_lmdb_environment_falls_back_naming_the_attribute = None
    test_an_open_file_in_a_dict_falls_back_naming_the_path = None
    test_after_a_kill_9_of_a_persistent_worker_the_batches_are_still_bit_identical = None
    test_subclasses_with_their_own_iterator_and_zero_workers_are_left_alone = None


class WorkerCountTest(unittest.TestCase):
    """$GOLDMINER_DATALOADER_WORKERS (`goldminer run --dataloader-workers M`)."""

    def setUp(self):
        sys.path.insert(0, os.path.join(ROOT, "python"))
        from goldminer import _offload_config, offload
        self.offload = offload
        self.config = _offload_config
        self.saved = os.environ.pop(offload.WORKERS_ENV, None)

    def tearDown(self):
        os.environ.pop(self.offload.WORKERS_ENV, None)
        if self.saved is not None:
            os.environ[self.offload.WORKERS_ENV] = self.saved

    def test_the_override_wins_and_a_bad_value_is_said_and_ignored(self):
        class Loader:
            num_workers = 2

        self.assertEqual(self.config.num_workers(Loader()), 2)
        os.environ[self.offload.WORKERS_ENV] = "5"
        self.assertEqual(self.config.num_workers(Loader()), 5)
        err = io.StringIO()
        saved, sys.stderr = sys.stderr, err
        try:
            for bad in ("0", "abc", "5000"):
                os.environ[self.offload.WORKERS_ENV] = bad
                self.assertEqual(self.config.num_workers(Loader()), 2, bad)
        finally:
            sys.stderr = saved
        self.assertIn("is not a worker count from 1 to 1024", err.getvalue())
        self.assertEqual(err.getvalue().count("goldminer:"), 1)  # said once

    def test_with_offload_off_the_flag_is_refused(self):
        env = {k: v for k, v in os.environ.items() if not k.startswith("GOLDMINER_")}
        proc = subprocess.run([goldminer_binary(), "run", "--offload", "off", "--no-db",
                               "--dataloader-workers", "3", "--pipeline", os.devnull, "--",
                               PYTHON, "-c", "pass"], capture_output=True, text=True, env=env,
                              timeout=TIMEOUT_S)
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("--dataloader-workers sets how many virtual workers", proc.stderr)


class VirtualWorkerTest(unittest.TestCase):
    """The virtual worker's JOB checks and its frames, in this process."""

    def setUp(self):
        sys.path.insert(0, os.path.join(ROOT, "python"))
        from goldminer import _vwire, _vworker
        self.wire, self.worker = _vwire, _vworker

    def job(self, **change):
        import cloudpickle
        blob = cloudpickle.dumps((0, [1, 2], True, None, False, None, 1, False), protocol=5)
        job = {"versions": self.worker.versions(), "digest": self.wire.blob_digest((blob, [])),
               "blob": blob, "buffers": [], "worker_id": 0, "base_seed": 1,
               "shared_seed": None}
        job.update(change)
        return job

    def take(self, job):
        return self.worker._take_job(job, self.worker._blob_of(job, None, None, []))

    def test_a_shutdown_that_came_before_the_blob_ends_the_loop_as_torch_expects(self):
        # torch's worker loop asserts that its done event is set when it gets None;
        # a trainer interrupted while the worker waited for its BLOB sent None first.
        import threading
        done = threading.Event()
        r, w = os.pipe()  # a channel that stays silent while the test looks
        self.addCleanup(os.close, w)  # then ends: the reader's thread ends with it
        tasks = self.worker._Tasks(os.fdopen(r, "rb"), done, [(0, [1]), None])
        self.assertEqual(tasks.get(), (0, [1]))
        self.assertIsNone(tasks.get())
        self.assertTrue(done.is_set())

    def test_a_job_is_taken(self):
        args = self.take(self.job())
        self.assertEqual(args[1], [1, 2])
        self.assertEqual(args[5], 1)  # base seed

    def test_another_torch_version_is_refused_naming_both(self):
        versions = dict(self.worker.versions(), torch="0.0.1")
        with self.assertRaisesRegex(ValueError, "the trainer has torch 0.0.1, this worker"):
            self.take(self.job(versions=versions))

    def test_a_module_missing_on_the_worker_is_named(self):
        import importlib
        import pickle
        # A class by reference to a module that the worker's Python does not have.
        d = tempfile.mkdtemp(prefix="goldminer-offload-mod-")
        with open(os.path.join(d, "gm_no_such_mod.py"), "w") as f:
            f.write("class X:\n    pass\n")
        sys.path.insert(0, d)
        try:
            import gm_no_such_mod
            blob = pickle.dumps((0, gm_no_such_mod.X(), True, None, False, None, 1, False))
        finally:
            sys.path.remove(d)
            sys.modules.pop("gm_no_such_mod", None)
            shutil.rmtree(d)
            importlib.invalidate_caches()
        job = self.job(blob=blob, digest=self.wire.blob_digest((blob, [])))
        with self.assertRaisesRegex(ValueError, "needs module 'gm_no_such_mod'"):
            self.take(job)

    def kept(self):
        """Waits for the cache's writers (they run beside the work)."""
        while self.worker._KEEPING:
            self.worker._KEEPING.pop().join()
        return sorted(os.listdir(self.worker.CACHE_DIR))

    def test_a_blob_that_does_not_match_its_digest_is_not_kept(self):
        import contextlib
        self.worker.CACHE_DIR = tempfile.mkdtemp(prefix="goldminer-vhost-test-")
        self.addCleanup(setattr, self.worker, "CACHE_DIR", None)
        self.addCleanup(shutil.rmtree, self.worker.CACHE_DIR)
        said = io.StringIO()
        with contextlib.redirect_stderr(said):
            args = self.take(self.job(digest="0" * 64))
            self.assertEqual(self.kept(), [])
        self.assertEqual(args[1], [1, 2], "the trainer's blob is worked on all the same")
        self.assertIn("does not match the digest its JOB named: not kept", said.getvalue())
        # One that matches is kept under its digest.
        job = self.job()
        self.take(job)
        self.assertEqual(self.kept(), [job["digest"]])

    def test_a_digest_is_the_same_whatever_the_threads(self):
        import numpy as np
        parts = (b"pickle", [np.arange(3 << 20, dtype=np.int32), bytearray(b"x" * 100)])
        one = self.wire.blob_digest(parts)
        many = self.wire.blob_digest((parts[0], [parts[1][0].tobytes(), bytes(parts[1][1])]))
        self.assertEqual(one, many)
        self.assertNotEqual(one, self.wire.blob_digest((parts[0], [parts[1][0][1:], parts[1][1]])))
        self.assertNotEqual(one, self.wire.blob_digest((b"pickl", [b"e", *parts[1]])),
                            "each part's length counts")

    def shipped_array(self):
        """A dataset holding a 1 MiB array, shipped as the offload ships it."""
        import numpy as np
        from goldminer import _ship, offload
        array = np.arange(1 << 18, dtype=np.float32)
        blob, digest, _ = offload.ship((0, [array], True, None, False, None, 1, False),
                                       _ship.ARG_NAMES)
        return array, blob, digest

    def test_an_arrays_bytes_go_from_the_dataset_to_the_channel_uncopied(self):
        import numpy as np
        from goldminer import offload
        array, blob, digest = self.shipped_array()
        self.assertEqual(self.wire.blob_size(blob), array.nbytes + len(blob[0]))

        class Chan:
            same_host = False
        # The JOB names the blob by its digest; the blob goes in a BLOB of its own,
        # the array's bytes a part of the frame as they are in the dataset.
        job = offload.job_frame(Chan(), self.job(digest=digest, blob=blob))
        self.assertIsNone(job["blob"])
        self.assertEqual(job["digest"], digest)
        parts = self.wire.encode(self.wire.BLOB, self.wire.blob_fields(blob))
        self.assertTrue(any(np.shares_memory(np.frombuffer(p, dtype=np.uint8), array)
                            for p in parts if memoryview(p).nbytes == array.nbytes))

    def test_the_host_keeps_a_blob_and_a_host_without_it_asks_for_it(self):
        array, blob, digest = self.shipped_array()
        full = self.job(digest=digest, **self.wire.blob_fields(blob))
        full = self.wire.read(io.BytesIO(b"".join(
            bytes(p) for p in self.wire.encode(self.wire.JOB, full))))[1]
        bare = self.job(digest=digest, blob=None, buffers=None)
        self.worker.CACHE_DIR = tempfile.mkdtemp(prefix="goldminer-vhost-test-")
        try:
            # The first worker has it in its JOB and leaves it to its host.
            out = io.BytesIO()
            args = self.worker._take_job(full, self.worker._blob_of(full, None, out, []))
            self.assertEqual(args[1][0].tolist(), array.tolist())
            self.assertEqual(self.kept(), [digest])
            # The next takes it from there, asking nothing.
            args = self.worker._take_job(bare, self.worker._blob_of(bare, None, out, []))
            self.assertEqual(args[1][0].tolist(), array.tolist())
            self.assertEqual(out.getvalue(), b"")
            # A host without it: NEED, then the BLOB, the tasks before it kept in order.
            os.remove(os.path.join(self.worker.CACHE_DIR, digest))
            inp = io.BytesIO(b"".join(bytes(p) for frame in (
                self.wire.encode(self.wire.TASK, (0, [1])),
                self.wire.encode(self.wire.BLOB, self.wire.blob_fields(blob))) for p in frame))
            early = []
            args = self.worker._take_job(bare, self.worker._blob_of(bare, inp, out, early))
            self.assertEqual(args[1][0].tolist(), array.tolist())
            self.assertEqual(early, [(0, [1])])
            self.assertEqual(self.wire.read(io.BytesIO(out.getvalue())),
                             (self.wire.NEED, digest))
            self.assertEqual(self.kept(), [digest], "and keeps what came")
        finally:
            self.kept()
            shutil.rmtree(self.worker.CACHE_DIR)
            self.worker.CACHE_DIR = None

    def test_frames_round_trip_tensors_out_of_band(self):
        import torch
        batch = {"x": torch.arange(12, dtype=torch.float32).reshape(3, 4).t(), "s": ["a", "b"],
                 "b": torch.tensor([True, False]), "h": torch.ones(2, dtype=torch.bfloat16)}
        parts = self.wire.encode(self.wire.RESULT, (4, batch))
        self.assertGreaterEqual(len(parts), 3)  # header, pickle, buffers
        kind, (idx, got) = self.wire.read(io.BytesIO(b"".join(bytes(p) for p in parts)))
        self.assertEqual((kind, idx), (self.wire.RESULT, 4))
        for k in ("x", "b", "h"):
            self.assertEqual(got[k].dtype, batch[k].dtype)
            self.assertTrue(torch.equal(got[k], batch[k]))
        self.assertEqual(got["s"], ["a", "b"])

    def test_a_worker_that_asks_for_the_blob_twice_is_ended_after_one(self):
        from goldminer import offload

        class Chan:
            killed = False
            lost = None

            def __init__(self, data):
                self.reader = io.BytesIO(data)

            def take_fd(self):
                return None

            def kill(self):
                self.killed = True

            def wait_exit(self, timeout):
                return -9 if self.killed else 0

        need = b"".join(bytes(p) for p in self.wire.encode(self.wire.NEED, "0" * 64))
        sent = []
        chan = Chan(need * 1000)
        why = offload.read_channel(chan, lambda *a: None, lambda: sent.append(1))
        self.assertEqual(sent, [1], "the blob is sent once")
        self.assertTrue(chan.killed)
        self.assertIn("sent a NEED frame", why)
        # One NEED is what a worker may send.
        chan = Chan(need)
        self.assertIsNone(offload.read_channel(chan, lambda *a: None, lambda: sent.append(2)))
        self.assertEqual(sent, [1, 2])
        self.assertFalse(chan.killed)

    def test_malformed_frames_are_frame_errors(self):
        good = b"".join(bytes(p) for p in self.wire.encode(self.wire.TASK, (3, [1, 2, 3])))
        rng = random.Random(1)
        for n in range(3000):
            data = bytearray(good)
            if n % 3 == 0:
                data = data[:rng.randrange(1, len(data))]  # cut short
            else:
                for _ in range(rng.randrange(1, 4)):
                    data[rng.randrange(len(data))] = rng.randrange(256)
            try:
                self.wire.read(io.BytesIO(bytes(data)))
            except self.wire.FrameError:
                pass
        with self.assertRaisesRegex(self.wire.FrameError, "magic"):
            self.wire.read(io.BytesIO(b"XXXX" + good[4:]))
        huge = self.wire.HEADER.pack(self.wire.MAGIC, self.wire.TASK, 0, 0, 1 << 40)
        with self.assertRaisesRegex(self.wire.FrameError, "at most"):
            self.wire.read(io.BytesIO(huge))
        flagged = self.wire.HEADER.pack(self.wire.MAGIC, self.wire.TASK, 0x80, 0, 0)
        with self.assertRaisesRegex(self.wire.FrameError, "unknown flags 0x80"):
            self.wire.read(io.BytesIO(flagged))
        self.assertIsNone(self.wire.read(io.BytesIO(b"")))

    def shm_frame(self, obj):
        """(the stream's bytes, the descriptor passed) of write_shm(obj)."""
        import socket
        a, b = socket.socketpair()
        self.addCleanup(a.close)
        self.addCleanup(b.close)
        stream = io.BytesIO()
        self.wire.write_shm(a, stream, self.wire.RESULT, obj)
        b.setblocking(False)  # a small result sends nothing there
        try:
            head, fds, _, _ = socket.recv_fds(b, 1 << 16, 1)
        except BlockingIOError:
            head, fds = b"", []
        return head + stream.getvalue(), fds

    def test_a_result_in_shared_memory_is_mapped_not_copied_and_equal(self):
        import torch
        batch = (torch.arange(40000, dtype=torch.float32).reshape(200, 200), ["x", "y"],
                 torch.arange(7))
        data, fds = self.shm_frame((5, batch))
        self.assertEqual(len(fds), 1)
        kind, pickle_bytes, buffers = self.wire.read_raw(io.BytesIO(data), lambda: fds.pop())
        self.assertEqual(kind, self.wire.RESULT)
        self.assertTrue(all(isinstance(b, memoryview) for b in buffers))  # views of the map
        index, got = self.wire.loads(kind, pickle_bytes, buffers)
        self.assertEqual(index, 5)
        self.assertTrue(torch.equal(got[0], batch[0]))
        self.assertEqual(got[1], ["x", "y"])
        self.assertTrue(torch.equal(got[2], batch[2]))
        got[0][0, 0] = -1  # a private mapping: writable, and nobody else sees it
        # Small results stay in the stream: no descriptor.
        small, none = self.shm_frame((6, torch.arange(3)))
        self.assertEqual(none, [])
        self.assertEqual(self.wire.read(io.BytesIO(small))[1][0], 6)

    def test_a_frame_in_shared_memory_needs_its_sealed_descriptor(self):
        import os
        import torch
        data, fds = self.shm_frame((1, torch.zeros(1 << 15)))
        with self.assertRaisesRegex(self.wire.FrameError, "without its descriptor"):
            self.wire.read_raw(io.BytesIO(data))
        with self.assertRaisesRegex(self.wire.FrameError, "without its descriptor"):
            self.wire.read_raw(io.BytesIO(data), lambda: None)
        os.close(fds[0])
        unsealed = os.memfd_create("x", os.MFD_CLOEXEC)
        os.ftruncate(unsealed, 1 << 20)
        with self.assertRaisesRegex(self.wire.FrameError, "not sealed"):
            self.wire.read_raw(io.BytesIO(data), lambda: os.dup(unsealed))
        r, w = os.pipe()
        os.close(w)
        with self.assertRaisesRegex(self.wire.FrameError, "not a memfd"):
            self.wire.read_raw(io.BytesIO(data), lambda: r)
        os.close(unsealed)

    def test_a_recycled_result_memfd_comes_back_once_the_trainer_lets_go_of_it(self):
        import gc
        import os
        import socket
        import torch
        recycler = self.wire.Recycler()
        a, b = socket.socketpair()
        self.addCleanup(a.close)
        self.addCleanup(b.close)
        released = []

        def frame(value):
            stream = io.BytesIO()
            self.wire.write_shm(a, stream, self.wire.RESULT, (value, torch.full((1 << 15,), value)),
                                recycler)
            head, fds, _, _ = socket.recv_fds(b, 1 << 16, 1)
            return head + stream.getvalue(), fds

        data, fds = frame(1.0)
        kind, pickled, buffers = self.wire.read_raw(io.BytesIO(data), lambda: fds.pop(),
                                                    release=released.append)
        got = self.wire.loads(kind, pickled, buffers)
        self.assertEqual(got[1][5].item(), 1.0)
        self.assertEqual(released, [], "still mapped")
        del got, buffers
        gc.collect()
        self.assertEqual(released, [1], "the mapping's last view is gone")
        self.assertEqual(len(recycler.out), 1)
        recycler.release(99)  # an id that is not out: nothing
        recycler.release(1)
        self.assertEqual((len(recycler.out), len(recycler.free)), (0, 1))
        data, fds = frame(2.0)  # written into the same memfd again
        self.assertEqual(len(recycler.free), 0)
        kind, pickled, buffers = self.wire.read_raw(io.BytesIO(data), lambda: fds.pop(),
                                                    release=released.append)
        self.assertEqual(self.wire.loads(kind, pickled, buffers)[1][7].item(), 2.0)
        # A reader that did not ask for recycled frames refuses one.
        data, fds = frame(3.0)
        with self.assertRaisesRegex(self.wire.FrameError, "did not ask for"):
            self.wire.read_raw(io.BytesIO(data), lambda: fds.pop())
        # At most RECYCLE_MAX out: then a one-off memfd, sealed against writing.
        while len(recycler.out) < self.wire.RECYCLE_MAX:
            frame(4.0)
        data, fds = frame(5.0)
        import fcntl
        self.assertTrue(fcntl.fcntl(fds[0], fcntl.F_GET_SEALS) & fcntl.F_SEAL_WRITE)
        kind, pickled, buffers = self.wire.read_raw(io.BytesIO(data), lambda: fds.pop())
        self.assertEqual(self.wire.loads(kind, pickled, buffers)[0], 5.0)
        self.assertEqual(len(recycler.out), self.wire.RECYCLE_MAX)



class HostCacheTest(unittest.TestCase):
    """The hosts' blob caches: a folder whose host was killed is removed, one in use is not."""

    def test_a_sweep_removes_only_the_folders_nobody_holds(self):
        import fcntl
        from goldminer import _vhost
        root = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, root, True)
        folders = {}
        for name in ("held", "free", "making", "stale"):
            folders[name] = os.path.join(root, f"goldminer-vhost-1-{name}")
            os.mkdir(folders[name])
        other = os.path.join(root, "someone-elses")
        os.mkdir(other)
        for name in ("held", "free"):
            with open(os.path.join(folders[name], "blob"), "wb") as f:
                f.write(b"x")
        lock = os.open(os.path.join(folders["held"], ".lock"), os.O_RDWR | os.O_CREAT)
        self.addCleanup(os.close, lock)
        fcntl.flock(lock, fcntl.LOCK_EX)
        os.close(os.open(os.path.join(folders["free"], ".lock"), os.O_RDWR | os.O_CREAT))
        os.utime(folders["stale"], (0, 0))
        _vhost.sweep(root)
        self.assertTrue(os.path.isdir(folders["held"]), "a live host's")
        self.assertTrue(os.path.isdir(folders["making"]), "a host is making it")
        self.assertTrue(os.path.isdir(other))
        self.assertFalse(os.path.exists(folders["free"]), "its host was killed")
        self.assertFalse(os.path.exists(folders["stale"]), "never finished, long ago")

    def test_a_host_killed_with_sigkill_leaves_no_blob_cache(self):
        import glob
        import signal
        import time
        from goldminer import _host_client, _vhost
        host = _host_client.Host()
        self.addCleanup(host.close)
        pattern = os.path.join(_vhost.cache_root(), f"goldminer-vhost-{host.proc.pid}-*")
        deadline = time.monotonic() + 120  # the host makes it once it imported torch
        while not glob.glob(pattern) and time.monotonic() < deadline:
            time.sleep(0.02)
        made = glob.glob(pattern)
        self.assertEqual(len(made), 1, "the host made its cache")
        os.kill(host.proc.pid, signal.SIGKILL)
        host.proc.wait()
        deadline = time.monotonic() + 60  # the trainer's reader sees the host gone
        while os.path.exists(made[0]) and time.monotonic() < deadline:
            time.sleep(0.02)
        self.assertFalse(os.path.exists(made[0]), f"{made[0]} was left behind")


class WorkerPlaceTest(unittest.TestCase):
    """A virtual worker takes the trainer's directory (goldminer._vworker._take_place)."""

    def test_a_directory_missing_on_the_workers_node_is_an_error_naming_it_and_the_node(self):
        sys.path.insert(0, os.path.join(ROOT, "python"))
        import socket
        from goldminer import _vworker
        here = os.getcwd()
        with self.assertRaises(ValueError) as caught:
            _vworker._take_place({"cwd": "/nonexistent/goldminer-run-dir"})
        self.assertEqual(os.getcwd(), here)
        self.assertIn(f"the trainer's working directory /nonexistent/goldminer-run-dir is not on "
                      f"node {socket.gethostname()}", str(caught.exception))


class ReplaceTest(unittest.TestCase):
    """A data worker killed a moment ago is still listed by the coordinator until it
    hears the connection close: a virtual worker placed on it is placed again
    elsewhere (goldminer._channels.WorkersPlace.open), not failed."""

    class Lib:
        def __init__(self, named):
            self.named = list(named)  # what gm_offload_place answers, in turn

        def gm_offload_place(self, offload, where):
            where._obj.value = self.named.pop(0).encode()
            return 0

    def place(self, named, live, refusing, code=5):
        sys.path.insert(0, os.path.join(ROOT, "python"))
        from goldminer import _channels, loader
        place = _channels.WorkersPlace()
        place._session = lambda: (self.Lib(named), None)
        place.live = lambda: list(live)
        tried = []

        def open_on(worker, modules):
            tried.append(worker)
            if worker in refusing:
                raise loader.ClientError(code, f"{worker}: cannot connect: Connection refused")
            return worker
        place.open_on = open_on
        return place, tried

    def test_a_refusing_worker_still_named_is_passed_over_for_a_live_one(self):
        place, tried = self.place(["10.0.0.1:5", "10.0.0.1:5"], ["10.0.0.1:5", "10.0.0.2:6"],
                                  {"10.0.0.1:5"})
        self.assertEqual(place.open(0, [], 1), "10.0.0.2:6")
        self.assertEqual(tried, ["10.0.0.1:5", "10.0.0.2:6"])

    def test_the_coordinator_naming_another_worker_next_is_followed(self):
        place, tried = self.place(["10.0.0.1:5", "10.0.0.3:7"], ["10.0.0.1:5"], {"10.0.0.1:5"})
        self.assertEqual(place.open(0, [], 1), "10.0.0.3:7")
        self.assertEqual(tried, ["10.0.0.1:5", "10.0.0.3:7"])

    def test_other_errors_are_raised_at_once(self):
        from goldminer import loader
        place, tried = self.place(["10.0.0.1:5"], ["10.0.0.1:5"], {"10.0.0.1:5"}, code=1)
        with self.assertRaises(loader.ClientError):
            place.open(0, [], 1)
        self.assertEqual(tried, ["10.0.0.1:5"])

    def test_at_the_programs_end_a_refusal_is_raised_at_once(self):
        from goldminer import loader
        from goldminer._lifetime import LIFETIME
        place, tried = self.place(["10.0.0.1:5", "10.0.0.2:6"], ["10.0.0.1:5", "10.0.0.2:6"],
                                  {"10.0.0.1:5"})
        LIFETIME.exiting = True
        try:
            with self.assertRaises(loader.ClientError):
                place.open(0, [], 1)
        finally:
            LIFETIME.exiting = False
        self.assertEqual(tried, ["10.0.0.1:5"])

    def test_refusals_past_the_deadline_are_raised(self):
        from goldminer import loader
        place, tried = self.place(["10.0.0.1:5"] * 3, ["10.0.0.1:5"], {"10.0.0.1:5"})
        place.REPLACE_S = -1.0  # already past
        with self.assertRaises(loader.ClientError):
            place.open(0, [], 1)
        self.assertEqual(tried, ["10.0.0.1:5"])

    def test_a_channel_opened_after_the_programs_end_began_is_ended_at_once(self):
        # Ctrl-C while a reader thread placed its virtual worker: end_channels did
        # not see the channel, whose reader then kept _at_exit waiting until `run`
        # killed the program (status 137 for 130).
        sys.path.insert(0, os.path.join(ROOT, "python"))
        from goldminer import _channels

        class Lib:
            def gm_vchannel_open(self, *args):
                return 0

        class Chan:
            def __init__(self, lib, handle, worker):
                self.killed = 0

            def kill(self):
                self.killed += 1

        place = _channels.WorkersPlace()
        place._session = lambda: (Lib(), None)
        saved, _channels.RemoteChan = _channels.RemoteChan, Chan
        try:
            before = place.open_on("10.0.0.1:5", [])
            place.end_channels()
            after = place.open_on("10.0.0.2:6", [])
        finally:
            _channels.RemoteChan = saved
        self.assertEqual((before.killed, after.killed), (1, 1))


class TorchVersionTest(unittest.TestCase):
    """What a torch the offload was not tested on gets (goldminer.offload.install)."""

    def setUp(self):
        sys.path.insert(0, os.path.join(ROOT, "python"))
        from goldminer import _patch, offload
        self.offload = offload
        self.patch = _patch

    def test_a_version_outside_the_tested_range_gets_one_line_and_those_inside_none(self):
        for inside in ("1.13.0a0", "1.13.1", "2.4.1", "2.15.0+cu132"):
            self.assertIsNone(self.patch.outside_tested(inside), inside)
        for outside in ("1.12.1", "2.16.0", "3.0.0"):
            line = self.patch.outside_tested(outside)
            self.assertIn(f"torch {outside} is outside the versions the offload is tested on "
                          f"(1.13 to 2.15)", line or "")

    def test_a_torch_without_the_internals_the_offload_drives_runs_stock_saying_so(self):
        import types
        from torch.utils.data import DataLoader

        class Iter:  # an iterator class that lacks _try_put_index
            def _reset(self):
                pass
            _process_data = _try_get_data = _next_data = _reset

        module = types.SimpleNamespace(DataLoader=DataLoader, _MultiProcessingDataLoaderIter=Iter)
        self.assertEqual(self.patch.missing_internals(module),
                         "_MultiProcessingDataLoaderIter._try_put_index")
        stock = DataLoader._get_iterator
        err = io.StringIO()
        real, sys.stderr = sys.stderr, err
        try:
            self.offload.install(module, "local")
        finally:
            sys.stderr = real
        self.assertIs(DataLoader._get_iterator, stock, "nothing was patched")
        self.assertFalse(self.patch.OFFLOAD.installed)
        self.assertIn("has no _MultiProcessingDataLoaderIter._try_put_index, which the offload "
                      "drives: its DataLoaders run on stock local workers", err.getvalue())
        from torch.utils.data import dataloader
        self.assertIsNone(self.patch.missing_internals(dataloader), "this torch has them all")


def load_tests(loader, tests, pattern):
    return scope.own_tests_only_on_legacy(tests, WorkersTransportTest)


if __name__ == "__main__":
    unittest.main()
