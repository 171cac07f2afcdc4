#!/usr/bin/python3
"""Benchmark: does `goldminer plan` predict what `goldminer run --plan` delivers?

For pipelines of clearly different cost per sample (small photos to 64x64 uint8;
ImageNet-sized photos to 224x224 float32; text cleaned by a Python exec stage),
on this machine (the local cluster: its CPUs, one trainer rank):
  1. goldminer profile --pipeline P -- plan_trainer.py   (profile.json)
  2. goldminer plan --profile profile.json               (plan.json: prediction)
  3. goldminer run --plan plan.json -- plan_trainer.py   (measured, --rounds times)
and prints predicted and measured samples/s side by side with their ratio. Each
trial profiles, plans and runs afresh (--trials); a trial's measured figure is the
median of its --rounds runs; the table shows medians over trials and the range of
the ratio (profiles of a cheap pipeline on a shared 2-vCPU machine vary by 10-15%
between trials, which is the point of repeating them). A last case gives the trainer a compute time per batch
and asks for 3x its demand: the plan must say the trainer binds, and the run
must deliver about the trainer's demand.

usage: plan_accuracy.py [--build build] [--trials 3] [--rounds 3] [--work DIR] [--seconds 8]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

from bench_util import run_checked

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PY = "/usr/bin/python3"
TRAINER = os.path.join(HERE, "plan_trainer.py")


def run(cmd, **kw):
    return run_checked("plan_accuracy", cmd, **kw)


def write_json(path, doc):
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)


def corpora(work):
    """small/: 3000 small real photos (about 200x150; six photos, copied); large/: ImageNet-sized crops of
    real photos (bench/make_corpus.py); reviews.jsonl: 20000 short HTML reviews."""
    small = os.path.join(work, "small")
    os.makedirs(os.path.join(small, "a"), exist_ok=True)
    photos = [os.path.join(ROOT, "tests/data/engine/photo%d.jpg" % i) for i in range(6)]
    for i in range(3000):
        shutil.copy(photos[i % 6], os.path.join(small, "a", "%04d.jpg" % i))
    large = os.path.join(work, "large")
    if not os.path.isdir(large):
        run([PY, os.path.join(HERE, "make_corpus.py"), large, "--count", "400"])
    with open(os.path.join(ROOT, "examples/exec_stage/reviews.jsonl")) as f:
        lines = f.read().splitlines()
    with open(os.path.join(work, "reviews.jsonl"), "w") as f:
        for i in range(20000):
            f.write(lines[i % len(lines)] + "\n")


def pipelines(work):
    small = {"version": 1, "name": "small-u8",
             "source": {"type": "files", "root": "small", "pattern": "**/*.jpg",
                        "label": "parent_dir"},
             "stages": [{"op": "decode_jpeg"},
                        {"op": "random_resized_crop", "size": [64, 64]},
                        {"op": "flip", "p": 0.5},
                        {"op": "to_tensor", "layout": "CHW", "dtype": "uint8"}],
             "batch": {"size": 64}, "shuffle": True, "seed": 1}
    with open(os.path.join(ROOT, "examples/imagenet/pipeline.json")) as f:
        large = json.load(f)
    large["source"]["root"] = "large"
    with open(os.path.join(ROOT, "examples/exec_stage/pipeline.json")) as f:
        text = json.load(f)
    text["source"]["paths"] = ["reviews.jsonl"]
    text["batch"] = {"size": 64}
    text["stages"][0]["cmd"] = [PY, "-m", "goldminer.stage", "clean_text:clean"]
    text["stages"][0]["processes"] = 1
    out = {}
    for name, doc in (("small-u8", small), ("imagenet-f32", large), ("text-exec", text)):
        path = os.path.join(work, name + ".json")
        write_json(path, doc)
        out[name] = path
    return out


def measure(gm, name, pipeline, work, rounds, seconds, step_s=0.0, target_factor=None,
            tcp=False):
    env = dict(os.environ)
    if tcp:  # the trainer's client takes batches over TCP; plan prices them so
        env["GOLDMINER_SAME_HOST"] = "off"
    env["PYTHONPATH"] = os.path.join(ROOT, "examples/exec_stage")  # clean_text for the exec stage
    prof = os.path.join(work, name + ".profile.json")
    trainer = [PY, TRAINER, "--step-s", str(step_s)]
    # About a second of pipeline per profile run: a cheap pipeline needs more samples.
    samples = {"small-u8": 3000, "imagenet-f32": 400, "text-exec": 20000}[name.split("+")[0]]
    run([gm, "-q", "profile", "--pipeline", pipeline, "--samples", str(min(samples, 8000)),
         "--steps", "30",
         "--warmup-steps", "5", "--no-db", "-o", prof, "--"] + trainer + ["--epochs", "1000"],
        cwd=work, env=env)
    plan_path = os.path.join(work, name + ".plan.json")
    cmd = [gm, "-q", "plan", "--profile", prof, "--no-db", "-o", plan_path, "--json"]
    if target_factor:
        demand = json.load(open(prof))["trainer"]["demand_samples_per_s"]
        cmd += ["--target-rate", str(demand * target_factor), "--best-effort"]
    plan = json.loads(run(cmd, cwd=work, env=env).stdout)
    predicted = plan["prediction"]["samples_per_s"]
    # Enough epochs for about `seconds` of steady state at the predicted rate.
    epochs = max(2, int(predicted * seconds / samples) + 1)
    measured = []
    for _ in range(rounds):
        r = run([gm, "-q", "run", "--plan", plan_path, "--epochs", str(epochs), "--"] + trainer +
                ["--epochs", str(epochs)], cwd=work, env=env)
        measured.append(json.loads(r.stdout.strip().splitlines()[-1])["samples_per_s"])
    m = statistics.median(measured)
    return {"name": name, "cpu_ms": plan["model"]["cpu_s_per_sample"] * 1e3,
            "workers": "%d x %d" % (plan["run"]["workers"], plan["run"]["threads_per_worker"]),
            "efficiency": plan["model"]["scaling_efficiency"], "limit": plan["prediction"]["limit"],
            "predicted": predicted, "measured": m, "ratio": m / predicted,
            "demand": plan["model"].get("demand_samples_per_s"), "rounds": measured}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=8)
    ap.add_argument("--work")
    ap.add_argument("--only", help="one case by name (small-u8, imagenet-f32, text-exec, "
                    "imagenet-f32+tcp, small-u8+trainer-bound)")
    args = ap.parse_args()
    gm = os.path.join(os.path.abspath(args.build), "cmd", "goldminer")
    work = args.work or tempfile.mkdtemp(prefix="goldminer-plan-bench-")
    os.makedirs(work, exist_ok=True)
    corpora(work)
    paths = pipelines(work)
    cases = [(name, path, 0.0, None, False) for name, path in paths.items()]
    # The same ImageNet pipeline with its 602 kB samples sent over TCP, as to a
    # trainer on another node: the plan adds the wire's cost per byte.
    cases.append(("imagenet-f32+tcp", paths["imagenet-f32"], 0.0, None, True))
    # The trainer computes 50 ms per batch of 64: demand about 1280 samples/s, below
    # what the small pipeline's workers make; the plan is asked for 3x that.
    cases.append(("small-u8+trainer-bound", paths["small-u8"], 0.05, 3, False))
    rows = []
    for name, path, step_s, factor, tcp in cases:
        if args.only and args.only != name:
            continue
        trials = []
        for _ in range(args.trials):
            trials.append(measure(gm, name, path, work, args.rounds, args.seconds, step_s, factor,
                                  tcp))
            print(json.dumps(trials[-1]), flush=True)
        ratios = [t["ratio"] for t in trials]
        row = dict(trials[len(trials) // 2])
        for key in ("cpu_ms", "efficiency", "predicted", "measured", "ratio"):
            row[key] = statistics.median(t[key] for t in trials)
        row["ratio_range"] = "%.2f-%.2f" % (min(ratios), max(ratios))
        row["limits"] = "/".join(sorted({t["limit"] for t in trials}))
        rows.append(row)
    print()
    print("%-24s %9s %8s %6s %-10s %11s %11s %6s %10s" % (
        "pipeline", "CPU ms/s", "workers", "eff", "limit", "predicted/s", "measured/s", "ratio",
        "range"))
    for r in rows:
        print("%-24s %9.3f %8s %6.2f %-10s %11.0f %11.0f %6.2f %10s" % (
            r["name"], r["cpu_ms"], r["workers"], r["efficiency"], r["limits"], r["predicted"],
            r["measured"], r["ratio"], r["ratio_range"]))
    print("(medians over %d trials of profile -> plan -> %d runs of `goldminer run --plan`; "
          "%d CPUs here)" % (args.trials, args.rounds, os.cpu_count()))


if __name__ == "__main__":
    main()
