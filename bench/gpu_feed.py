#!/usr/bin/python3
"""Benchmark: how fast three feeds keep a GPU training ResNet-50 busy, in one run.

The same training step (torchvision ResNet-50, 1000 classes, bf16 autocast on CUDA,
channels_last, SGD lr 0.1 momentum 0.9, batch 128) is fed by:
  (a) gpu-resident: one batch already on the device, reused every step: the GPU's
      own rate, the ceiling of any feed;
  (b) torch DataLoader + torchvision transforms (RandomResizedCrop 224,
      RandomHorizontalFlip, ToTensor, Normalize) on PIL images (torch_peer.Folder),
      pin_memory=True on CUDA, persistent workers, file_system sharing (15 workers
      with the default strategy died with ConnectionResetError on the GPU machine),
      at each worker count of --torch-workers; the best one is (b);
  (c) goldminer: `goldminer run --workers W --threads-per-worker T --epochs E
      --pipeline P -- python3 gpu_feed.py --feed-child ...`; the child trains from
      goldminer.torch.DeviceLoader (or, while that does not exist yet, from
      GoldminerDataset + .to(device, non_blocking=True), said in its row). P is
      examples/imagenet/pipeline.json over the corpus with decode_jpeg,
      random_resized_crop, flip on the workers and to_tensor + normalize marked
      "on": "device" (uint8 on the wire, float on the GPU); --cpu-tail puts every
      stage on the workers (float32 on the wire), for builds without "on".
over the benchmark corpus (make_corpus.py: ImageNet-sized crops of real photos,
labels = class index modulo 1000). A corpus smaller than the images the steps need
is linked (hard or symbolic links, repeated) to that many files, so that one epoch
covers each feed: goldminer's epochs are a barrier, which a small corpus would hit
every few steps and ImageNet does not. Each feed runs --warmup steps not counted, then
--steps timed steps (the device is synchronized before each clock read); rounds
alternate the feeds; medians are printed with the share of (a) and (c)/(b).
Targets (reported, not enforced): (c) >= 90% of (a) and (c) >= 2.5x (b).

On the GPU machine (scripts/gpu_feed.sh packs the binaries and a corpus and runs
this with settings that fit in a few minutes):
    python3 bench/gpu_feed.py --goldminer DIR/cmd/goldminer --corpus DIR/corpus-512 \\
        --json OUT/gpu_feed.json
CPU smoke (any machine; device tail needs a build that accepts "on"):
    /usr/bin/python3 bench/gpu_feed.py --device cpu --model resnet18 --batch 16 \\
        --steps 3 --warmup 1 --rounds 1 --images 200 --image-size 64 --cpu-tail

Flags:
  --device D          cuda when torch sees one, else cpu
  --model M           resnet50 (default) or resnet18 (a quick CPU smoke)
  --batch B           batch size (128); --image-size S: crop size (224)
  --steps N           timed steps per feed (100); --warmup N: steps before (10)
  --rounds R          rounds of (a), (b) at each worker count, (c) (3)
  --images N          corpus size, built once in build/bench/corpus-N (2000)
  --corpus DIR        use this corpus as it is (e.g. one packed for the GPU machine)
  --torch-workers L   DataLoader worker counts to try ("8,15", each at most cpus-1)
  --workers W         goldminer workers (default: (cpus-K) // T, at least 1, where K,
                      the CPUs the trainer keeps, is 2 on 8 or more CPUs, else 1)
  --threads T         stage threads per goldminer worker (default: min(2, cpus-1);
                      7 x 2 was the best uint8 configuration on the 16-core box)
  --goldminer PATH    the binary ($GOLDMINER, else build/cmd/goldminer)
  --cpu-tail          to_tensor + normalize on the workers (no "on" keys)
  --trainer-cpus L    goldminer run --trainer-cpus for (c): a CPU list, "none", or
                      "auto" (default): the CPUs the workers' threads leave, at least one
  --json OUT          write every figure to OUT
  --feed-timeout S    seconds one `goldminer run` may take (900)
Exit status: 0 when the run completed; 3 when the build rejects "on" (rerun with
--cpu-tail); other non-zero on failures.
"""
import argparse
import glob
import json
import math
import os
import statistics
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import torchvision  # noqa: E402

MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]
CLASSES = 1000
RESULT_TAG = "gpu_feed-result "  # the child's JSON line on stdout starts with this
ON_REJECTED = 3  # exit status when the build does not know the "on" stage key


# --- the training step, shared by every feed ------------------------------------------

def make_model(args, device):
    """The model and its optimizer, on the device, channels_last."""
    torch.manual_seed(0)
    model = getattr(torchvision.models, args.model)(num_classes=CLASSES)
    model = model.to(device, memory_format=torch.channels_last).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    return model, opt


def train_step(model, opt, x, y, device):
    # bf16 autocast on CUDA only: on a CPU smoke it would only make the step slower.
    with torch.autocast(device_type=device.type, dtype=torch.bfloat16,
                        enabled=device.type == "cuda"):
        loss = F.cross_entropy(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed_training(model, opt, batches, device, warmup, steps):
    """Trains on `batches` (an iterator of (x, y) on the device) for warmup + steps
    steps; returns {images, seconds, images_per_s, wait_s} of the timed steps.
    wait_s: host time spent waiting in next() (the GPU may still be busy then)."""
    images, wait_s, t0 = 0, 0.0, None
    for i in range(warmup + steps):
        if i == warmup:
            sync(device)
            t0 = time.perf_counter()
            images, wait_s = 0, 0.0
        w0 = time.perf_counter()
        try:
            x, y = next(batches)
        except StopIteration:
            raise SystemExit(f"gpu_feed: the feed ended after {i} of {warmup + steps} steps "
                             "(corpus too small for the batch, or too few epochs)")
        wait_s += time.perf_counter() - w0
        train_step(model, opt, x, y, device)
        images += x.shape[0]
    sync(device)
    dt = time.perf_counter() - t0
    return {"images": images, "seconds": dt, "images_per_s": images / dt, "wait_s": wait_s}


# --- (a) and (b): in this process ----------------------------------------------------------

def peer_dataset(corpus, size):
    """torch_peer's Folder (PIL + torchvision ImageNet transforms) at crop `size`,
    labels modulo 1000."""
    import torch_peer
    from torchvision import transforms

    class Photos(torch_peer.Folder):
        def __init__(self):
            super().__init__(corpus, 0)
            self.tf = transforms.Compose([
                transforms.RandomResizedCrop(size),
                transforms.RandomHorizontalFlip(),
                transforms.ToTensor(),
                transforms.Normalize(MEAN, STD),
            ])

        def __getitem__(self, i):
            x, label = super().__getitem__(i)
            return x, label % CLASSES

    return Photos()


def feed_resident(args, ds, model, opt, device, steps=None):
    """(a): one batch made once (the first images of the corpus), reused every step."""
    items = [ds[i % len(ds)] for i in range(args.batch)]
    x = torch.stack([t for t, _ in items]).to(device, memory_format=torch.channels_last)
    y = torch.tensor([label for _, label in items], dtype=torch.int64, device=device)

    def forever():
        while True:
            yield x, y
    return timed_training(model, opt, forever(), device, args.warmup, steps or args.steps)


def torch_batches(loader, device, pin):
    """The DataLoader's batches on the device, epoch after epoch."""
    while True:
        for x, y in loader:
            yield (x.to(device, non_blocking=pin, memory_format=torch.channels_last),
                   y.to(device, non_blocking=pin))


def feed_torch(args, ds, model, opt, device, workers):
    """(b): a DataLoader with `workers` worker processes, epochs as needed."""
    pin = device.type == "cuda"
    loader = torch.utils.data.DataLoader(
        ds, batch_size=args.batch, shuffle=True, drop_last=True, num_workers=workers,
        pin_memory=pin, persistent_workers=workers > 0)
    it = torch_batches(loader, device, pin)
    try:
        return timed_training(model, opt, it, device, args.warmup, args.steps)
    finally:
        it.close()
        del it, loader  # ends the worker processes before the next feed runs


# --- (c): goldminer run with this script as the trainer ----------------------------------

def write_pipeline(path, corpus, batch, size, cpu_tail):
    """examples/imagenet/pipeline.json over `corpus`: the workers decode, crop and
    flip; to_tensor and normalize go "on": "device" unless cpu_tail."""
    with open(os.path.join(ROOT, "examples", "imagenet", "pipeline.json")) as f:
        spec = json.load(f)
    by_op = {s["op"]: s for s in spec["stages"]}
    on = {} if cpu_tail else {"on": "device"}
    spec["source"]["root"] = os.path.abspath(corpus)
    spec["stages"] = [
        by_op["decode_jpeg"],
        dict(by_op["random_resized_crop"], size=[size, size]),
        by_op["flip"],
        dict({"op": "to_tensor", "layout": "CHW", "dtype": "float32"}, **on),
        dict(by_op["normalize"], **on),
    ]
    spec["batch"] = {"size": batch, "drop_last": True}
    spec["name"] = "gpu-feed" + ("-cpu-tail" if cpu_tail else "")
    with open(path, "w") as f:
        json.dump(spec, f, indent=1)


def on_rejected(stderr):
    # Today's builds say: $.stages[3]: unknown key "on" (known keys: ...).
    return '"on"' in stderr


def say_on_rejected(gm):
    sys.stderr.write(f"gpu_feed: this goldminer build ({gm}) does not accept the "
                     "\"on\": \"device\" stage key yet; rerun with --cpu-tail (to_tensor and "
                     "normalize on the workers, float32 on the wire)\n")


def check_pipeline(gm, pipeline, batch, env):
    """Runs one batch of the pipeline with `goldminer worker --local` first, so a
    build that rejects "on" is found before any training. Exits ON_REJECTED then;
    other failures are only warned about (the run itself will tell)."""
    cmd = [gm, "worker", "--local", "--pipeline", pipeline, "--threads", "1", "--limit",
           str(batch), "--json", "--no-progress"]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       env=env, timeout=300)
    if r.returncode != 0:
        sys.stderr.write(r.stderr[-2000:])
        if on_rejected(r.stderr):
            say_on_rejected(gm)
            raise SystemExit(ON_REJECTED)
        sys.stderr.write(f"gpu_feed: warning: the pipeline check failed ({r.returncode}): "
                         f"{' '.join(cmd)}\n")


def feed_goldminer(args, gm, pipeline, epochs, env, work):
    """(c): one `goldminer run`; the child's figures (its JSON line on stdout)."""
    cmd = [gm, "-q", "run", "--no-db", "--no-progress", "--pipeline", pipeline,
           "--workers", str(args.workers), "--threads-per-worker", str(args.threads),
           "--epochs", str(epochs)]
    if args.trainer_cpus != "none":
        cmd += ["--trainer-cpus", args.trainer_cpus]
    cmd += ["--",
           sys.executable, os.path.abspath(__file__), "--feed-child",
           "--child-epochs", str(epochs), "--device", args.device, "--model", args.model,
           "--batch", str(args.batch), "--steps", str(args.steps), "--warmup", str(args.warmup)]
    if args.cpu_tail:
        cmd.append("--cpu-tail")
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       env=env, cwd=work, timeout=args.feed_timeout)
    results = [line[len(RESULT_TAG):] for line in r.stdout.splitlines()
               if line.startswith(RESULT_TAG)]
    if r.returncode != 0 or not results:
        sys.stderr.write(r.stdout[-2000:] + r.stderr[-3000:])
        if on_rejected(r.stderr):
            say_on_rejected(gm)
            raise SystemExit(ON_REJECTED)
        raise SystemExit(f"gpu_feed: goldminer run failed ({r.returncode}): {' '.join(cmd)}")
    return json.loads(results[-1])


def device_batches_fallback(loader, device, wire):
    """Without DeviceLoader: GoldminerDataset batches copied with .to(device,
    non_blocking=True) (pageable memory, so in effect a plain copy). When the wire
    carries uint8 (the pipeline's tail is "on": "device"), the to_tensor and
    normalize (MEAN, STD: the pipeline's) are done here on the device. `wire`
    gets the first batch's dtype and shape as received."""
    mean = torch.tensor(MEAN, device=device).view(1, 3, 1, 1)
    std = torch.tensor(STD, device=device).view(1, 3, 1, 1)
    for batch in loader:
        if not wire:
            wire["wire"] = f"{batch['image'].dtype} {list(batch['image'].shape)}"
        x = batch["image"].to(device, non_blocking=True)
        if x.dtype == torch.uint8:
            if x.shape[-1] == 3:
                x = x.permute(0, 3, 1, 2)  # NHWC memory seen as NCHW: channels_last
            x = (x.float().div_(255) - mean) / std
        yield x.contiguous(memory_format=torch.channels_last), batch["label"]


def feed_child(args):
    """The trainer under `goldminer run`: prints RESULT_TAG + JSON on stdout."""
    device = torch.device(args.device)
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True
    model, opt = make_model(args, device)
    try:
        from goldminer.torch import DeviceLoader
    except ImportError:
        DeviceLoader = None
    if DeviceLoader is not None:
        loader = DeviceLoader(device=args.device, prefetch=2, channels_last=True,
                              epochs=args.child_epochs)
        source = ((b["image"], b["label"]) for b in loader)
        how = "DeviceLoader(prefetch=2, channels_last=True)"
    else:
        from goldminer.torch import GoldminerDataset
        loader = GoldminerDataset(epochs=args.child_epochs)
        wire = {}
        source = device_batches_fallback(loader, device, wire)
        how = "fallback: GoldminerDataset + .to(device, non_blocking=True) (no DeviceLoader yet)"
    batches = ((x, y.to(device, non_blocking=True).remainder(CLASSES)) for x, y in source)
    out = timed_training(model, opt, batches, device, args.warmup, args.steps)
    if DeviceLoader is None:
        how += f"; wire {wire.get('wire')}"
    out["loader"] = how
    out["stats"] = loader.stats()
    print(RESULT_TAG + json.dumps(out, default=str), flush=True)


# --- the run ------------------------------------------------------------------------------

def corpus_dir(args):
    """The corpus: --corpus as it is, else BUILD/bench/corpus-N made once."""
    if args.corpus:
        if not glob.glob(os.path.join(args.corpus, "*", "*.jpg")):
            raise SystemExit(f"gpu_feed: no images under {args.corpus}/<class>/*.jpg")
        return os.path.abspath(args.corpus)
    corpus = os.path.join(ROOT, "build", "bench", f"corpus-{args.images}")
    from bench_util import run_checked
    r = run_checked("gpu_feed", [sys.executable, os.path.join(HERE, "make_corpus.py"), corpus,
                                 "--count", str(args.images)])
    print(r.stdout.strip(), file=sys.stderr)
    return corpus


def epoch_corpus(corpus, need, work):
    """A corpus with at least `need` images, so that one epoch covers every step of
    a feed: goldminer's epochs are a barrier (the next starts when the trainer has
    acknowledged the last batch of this one), which would drain its pipeline every
    few steps on a small corpus and not on ImageNet's 1.28M images. Returns `corpus`
    when it is big enough, else WORK/epoch/<class>/<copy>-<name>.jpg: hard links
    (symbolic ones across file systems) to its files, repeated. Same bytes, same
    page cache: the decode work per image is unchanged."""
    files = sorted(glob.glob(os.path.join(corpus, "*", "*.jpg")))
    if len(files) >= need:
        return corpus, len(files)
    copies = math.ceil(need / len(files))
    out = os.path.join(work, "epoch")
    for c in range(copies):
        for f in files:
            cls = os.path.basename(os.path.dirname(f))
            os.makedirs(os.path.join(out, cls), exist_ok=True)
            dst = os.path.join(out, cls, f"{c:03d}-{os.path.basename(f)}")
            try:
                os.link(f, dst)
            except OSError:
                os.symlink(f, dst)
    return out, len(files)


def goldminer_env(gm):
    """The environment for goldminer: this checkout's Python package and the client
    library beside the binary (BUILD/client), unless already set."""
    env = dict(os.environ)
    env.setdefault("GOLDMINER_PYTHONPATH", os.path.join(ROOT, "python"))
    client = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(gm))), "client",
                          "libgoldminer_client.so")
    if os.path.exists(client):
        env.setdefault("GOLDMINER_CLIENT_LIB", client)
    return env


def print_table(args, med, best_w, c_label):
    a = med["a"]
    rows = [("(a) gpu-resident", a)]
    for w in args.torch_workers:
        mark = " (best)" if w == best_w and len(args.torch_workers) > 1 else ""
        rows.append((f"(b) torch DataLoader, {w} workers{mark}", med[f"b{w}"]))
    rows.append((f"(c) goldminer, {args.workers} workers x {args.threads} threads, {c_label}",
                 med["c"]))
    width = max(len(r[0]) for r in rows) + 2
    print(f"{'feed':{width}}{'images/s':>10}{'% of (a)':>10}")
    for name, v in rows:
        print(f"{name:{width}}{v:10.1f}{100 * v / a:9.1f}%")
    b = med[f"b{best_w}"]
    print(f"(c) / (b, {best_w} workers): {med['c'] / b:.2f}x")
    t1, t2 = med["c"] >= 0.9 * a, med["c"] >= 2.5 * b
    print(f"target (c) >= 90% of (a): {'MET' if t1 else 'NOT MET'} ({100 * med['c'] / a:.1f}%)")
    print(f"target (c) >= 2.5x (b):   {'MET' if t2 else 'NOT MET'} ({med['c'] / b:.2f}x)")
    return {"c_of_a": med["c"] / a, "c_over_b": med["c"] / b, "b_of_a": b / a,
            "target_c_90pct_of_a": t1, "target_c_2_5x_b": t2}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cpus = os.cpu_count() or 1
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--model", default="resnet50", choices=["resnet50", "resnet18"])
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--images", type=int, default=2000)
    ap.add_argument("--corpus")
    ap.add_argument("--torch-workers", default="8,15")
    ap.add_argument("--threads", type=int, default=min(2, max(1, cpus - 1)))
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--goldminer", default=os.environ.get("GOLDMINER") or
                    os.path.join(ROOT, "build", "cmd", "goldminer"))
    ap.add_argument("--cpu-tail", action="store_true")
    ap.add_argument("--trainer-cpus", default="auto",
                    help="goldminer run --trainer-cpus for (c): a CPU list, 'none', or "
                         "'auto': the CPUs the workers' threads leave (at least one)")
    ap.add_argument("--json")
    ap.add_argument("--feed-timeout", type=float, default=900,
                    help="seconds one `goldminer run` may take")
    ap.add_argument("--feed-child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--child-epochs", type=int, default=1, help=argparse.SUPPRESS)
    args = ap.parse_args()
    torch.set_num_threads(1)
    # CPU runs: training one batch over and over makes denormal floats, which cost
    # one step 30x its time here (no effect on the GPU's arithmetic).
    torch.set_flush_denormal(True)
    if args.feed_child:
        return feed_child(args)

    # The trainer keeps two CPUs on a GPU box (its own thread, and the device
    # loader's thread that receives, stages and issues the copies), one on a small one.
    keep = 2 if cpus >= 8 else 1
    args.workers = args.workers or max(1, (cpus - keep) // args.threads)
    if args.trainer_cpus == "auto":
        allowed = sorted(os.sched_getaffinity(0))
        keep = max(1, len(allowed) - args.workers * args.threads)
        args.trainer_cpus = (",".join(str(c) for c in allowed[:keep])
                             if keep < len(allowed) else "none")
    args.torch_workers = sorted({min(int(w), max(1, cpus - 1))
                                 for w in args.torch_workers.split(",")})
    gm = os.path.abspath(args.goldminer)
    if not os.access(gm, os.X_OK):
        raise SystemExit(f"gpu_feed: no goldminer binary at {gm} (--goldminer or $GOLDMINER)")
    device = torch.device(args.device)
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True
    torch.multiprocessing.set_sharing_strategy("file_system")
    work = tempfile.mkdtemp(prefix="gpu-feed-")
    try:
        run(args, gm, device, cpus, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run(args, gm, device, cpus, work):
    """The rounds and the table; `work` is a scratch directory."""
    base = corpus_dir(args)
    # 10% more than the steps need: goldminer's batches per split end short.
    corpus, distinct = epoch_corpus(base, math.ceil(1.1 * (args.warmup + args.steps) *
                                                    args.batch), work)
    ds = peer_dataset(corpus, args.image_size)
    per_epoch = len(ds) // args.batch
    if per_epoch == 0:
        raise SystemExit(f"gpu_feed: {len(ds)} images in {corpus}: fewer than one batch")
    # One epoch more than the steps need, as a margin.
    epochs = math.ceil((args.warmup + args.steps) / per_epoch) + 1
    env = goldminer_env(gm)
    tail = "tail on the workers" if args.cpu_tail else "tail on the device"
    dev_name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(f"gpu_feed: {args.model} on {dev_name} (torch {torch.__version__}, "
          f"{'bf16 autocast' if device.type == 'cuda' else 'float32'}, channels_last), "
          f"batch {args.batch}, {args.image_size}px, corpus {base} ({distinct} images"
          f"{f', linked to {len(ds)} files for one epoch' if corpus != base else ''}), "
          f"{args.warmup}+{args.steps} steps, {args.rounds} rounds, {cpus} cpus; goldminer "
          f"{args.workers} workers x {args.threads} threads, trainer on CPUs "
          f"{args.trainer_cpus}, {tail} (to_tensor+normalize); "
          f"torch workers {args.torch_workers}", flush=True)

    runs = {"a": [], "c": [], **{f"b{w}": [] for w in args.torch_workers}}
    detail = {k: [] for k in runs}
    child_loader = None
    pipeline = os.path.join(work, "pipeline.json")
    write_pipeline(pipeline, corpus, args.batch, args.image_size, args.cpu_tail)
    check_pipeline(gm, pipeline, args.batch, env)
    model, opt = make_model(args, device)
    # One-time costs (cuDNN's algorithm search, allocator growth) before round 1, so
    # that they do not land on the first feed timed.
    feed_resident(args, ds, model, opt, device, steps=1)
    for r in range(args.rounds):
        print(f"round {r + 1}/{args.rounds} ...", file=sys.stderr, flush=True)
        feeds = [("a", lambda: feed_resident(args, ds, model, opt, device))]
        feeds += [(f"b{w}", lambda w=w: feed_torch(args, ds, model, opt, device, w))
                  for w in args.torch_workers]
        feeds += [("c", lambda: feed_goldminer(args, gm, pipeline, epochs, env, work))]
        for key, feed in feeds:
            out = feed()
            runs[key].append(out["images_per_s"])
            detail[key].append(out)
            child_loader = out.get("loader", child_loader)
            print(f"  {key}: {out['images_per_s']:.1f} images/s "
                  f"(waited {out['wait_s']:.2f} of {out['seconds']:.2f} s)",
                  file=sys.stderr, flush=True)

    med = {k: statistics.median(v) for k, v in runs.items()}
    best_w = max(args.torch_workers, key=lambda w: med[f"b{w}"])
    print()
    print(f"{args.model}, batch {args.batch}, {args.image_size}px, {args.steps} timed steps, "
          f"{args.rounds} rounds, medians (images/s)")
    print(f"goldminer trainer: {child_loader}")
    ratios = print_table(args, med, best_w, tail)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"runs": runs, "detail": detail, "medians": med, "ratios": ratios,
                       "best_torch_workers": best_w, "goldminer_loader": child_loader,
                       "config": {k: v for k, v in vars(args).items() if k != "feed_child"},
                       "epochs": epochs, "images": distinct, "epoch_files": len(ds),
                       "corpus": base, "cpus": cpus,
                       "device_name": dev_name, "torch": torch.__version__,
                       "torchvision": torchvision.__version__,
                       "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
                       "torch_threads": torch.get_num_threads()}, f, indent=1)


if __name__ == "__main__":
    main()
