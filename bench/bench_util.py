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
