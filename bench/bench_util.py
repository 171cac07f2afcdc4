"""Helpers shared by the benchmark scripts."""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def run_checked(name, cmd, **kw):
    """Runs cmd, capturing its output; on failure prints the tail of its stderr and
    exits naming the benchmark and the command."""
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    if r.returncode != 0:
        sys.stderr.write(r.stderr[-3000:])
        raise SystemExit("%s: failed (%d): %s" % (name, r.returncode, " ".join(cmd)))
    return r


def image_corpus(build, images):
    """build/bench/corpus-N: N ImageNet-sized crops of real photos, made once
    (make_corpus.py), as an ImageFolder's root."""
    corpus = os.path.join(build, "bench", f"corpus-{images}")
    subprocess.run([sys.executable, os.path.join(HERE, "make_corpus.py"), corpus,
                    "--count", str(images)], check=True, stdout=subprocess.DEVNULL)
    return corpus


def write_script(build, name, text):
    """build/bench/`name` with `text` in it: a benchmark's program; its path."""
    path = os.path.join(build, "bench", name)
    with open(path, "w") as f:
        f.write(text)
    return path


def image_script_args(doc, root):
    """The arguments of a benchmark that runs a script over an image corpus,
    rounds against its peers: --build, --python (the script's interpreter),
    --images, --epochs, --rounds."""
    import argparse
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(root, "build"))
    ap.add_argument("--python", default="/usr/bin/python3", help="the script's interpreter")
    ap.add_argument("--images", type=int, default=512)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    return ap.parse_args()


# Runs argv in a process of its own, passes on its output, then prints one line
# with what every process below it used once they ended (RUSAGE_CHILDREN).
_MEASURE = r'''
import json, resource, subprocess, sys
proc = subprocess.run(sys.argv[1:], capture_output=True, text=True)
sys.stderr.write(proc.stderr)
sys.stdout.write(proc.stdout)
c = resource.getrusage(resource.RUSAGE_CHILDREN)
print("gm-measure", json.dumps({"cpu_s": c.ru_utime + c.ru_stime, "maxrss_kib": c.ru_maxrss}))
sys.exit(proc.returncode)
'''


def run_measured(what, argv, env):
    """(the last JSON object argv printed, {cpu_s, maxrss_kib} of all its process
    tree): a script run from a process that starts only it. Exits naming `what`
    and showing its stderr when it fails."""
    import json
    out = subprocess.run([sys.executable, "-c", _MEASURE, *argv], env=env, capture_output=True,
                         text=True, timeout=3600)
    if out.returncode != 0:
        sys.exit(f"the script failed ({what}):\n{out.stderr}")
    lines = out.stdout.strip().splitlines()
    used = json.loads(lines[-1].split(" ", 1)[1])
    return json.loads([line for line in lines if line.startswith("{")][-1]), used


# The ImageNet training transform over an ImageFolder at sys.argv[1], batch 64,
# 2 persistent workers, shuffled by a seeded generator: `loader`, for the
# benchmarks' scripts (cut_bench.py, native_bench.py).
IMAGE_LOADER = r'''
import torch, torchvision
from torchvision import transforms as T
t = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(),
               T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
g = torch.Generator()
g.manual_seed(1)
loader = torch.utils.data.DataLoader(torchvision.datasets.ImageFolder(sys.argv[1], transform=t),
                                     batch_size=64, shuffle=True, generator=g, num_workers=2,
                                     persistent_workers=True)
'''
