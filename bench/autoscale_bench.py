#!/usr/bin/python3
"""Benchmark: the autoscaler against the best fixed worker count, in one run.

A CPU-heavy pipeline (the ImageNet pipeline on ImageNet-sized crops of real photos)
feeds a trainer whose step costs a fixed time and no CPU (a sleep: a GPU-bound step)
under `goldminer run`:
  (a) with 1, 2, ... --max-fixed workers, fixed: the steady-state samples/s of each
      (bench/plan_trainer.py's own measure), and the best of them;
  (b) with --autoscale on, from 1 worker, --repeat times (5): each run's time
      series in runs.db gives when the delivered rate (over 10 s) first reaches
      95% of the best fixed rate, the mean rate after 60 s (to the run's last
      period), the most workers used after 60 s, and the decision log; the goal
      is at least 0.95x the best fixed rate with at most one worker above the
      best count, in every run. Right before each autoscaled run the best count
      runs fixed again (25 s), and the run is judged against that rate: a
      machine whose speed drifts between runs minutes apart (a shared host, its
      clock, its cache) would otherwise read as the autoscaler's choice;
  (c) a trainer that is the bottleneck (a slow step), autoscaled: what it added.

usage: autoscale_bench.py [--build build] [--seconds 120] [--max-fixed 3] [--repeat 5]
                          [--work DIR]
"""
import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile

from bench_util import run_checked

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PY = "/usr/bin/python3"
TRAINER = os.path.join(HERE, "plan_trainer.py")
IMAGES = 400


def run(cmd, **kw):
    return run_checked("autoscale_bench", cmd, **kw)


def goldminer_run(gm, work, pipeline, workers, seconds, rate_guess, step_s, extra, name):
    epochs = max(2, int(seconds * rate_guess / IMAGES))
    cmd = [gm, "-q", "run", "--pipeline", pipeline, "--workers", str(workers), "--epochs",
           str(epochs), "--db", os.path.join(work, "runs.db"), "--name", name] + extra + \
          ["--", PY, TRAINER, "--epochs", str(epochs), "--step-s", str(step_s), "--skip", "20"]
    out = run(cmd, cwd=work).stdout
    return json.loads(out.strip().splitlines()[-1])


def series(work, name):
    db = sqlite3.connect(os.path.join(work, "runs.db"))
    rows = db.execute("SELECT t_s, name, value FROM metrics WHERE run_id = ? ORDER BY t_s",
                      (name,)).fetchall()
    events = [m for (m,) in db.execute(
        "SELECT message FROM events WHERE run_id = ? AND kind = 'scale' ORDER BY id", (name,))]
    by = {}
    for t, n, v in rows:
        by.setdefault(n, []).append((t, v))
    return by, events


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--seconds", type=float, default=120)
    ap.add_argument("--max-fixed", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=5, help="autoscaled runs")
    ap.add_argument("--step-s", type=float, default=0.02, help="the trainer's step (batch of 64)")
    ap.add_argument("--work")
    args = ap.parse_args()
    gm = os.path.join(os.path.abspath(args.build), "cmd", "goldminer")
    work = args.work or tempfile.mkdtemp(prefix="goldminer-autoscale-bench-")
    corpus = os.path.join(work, "corpus")
    if not os.path.isdir(corpus):
        run([PY, os.path.join(HERE, "make_corpus.py"), corpus, "--count", str(IMAGES)])
    with open(os.path.join(ROOT, "examples/imagenet/pipeline.json")) as f:
        pipeline = json.load(f)
    pipeline["source"]["root"] = "corpus"
    path = os.path.join(work, "pipeline.json")
    with open(path, "w") as f:
        json.dump(pipeline, f)
    if os.path.exists(os.path.join(work, "runs.db")):
        os.remove(os.path.join(work, "runs.db"))

    fixed = {}
    for n in range(1, args.max_fixed + 1):
        r = goldminer_run(gm, work, path, n, 25, 500 * n, args.step_s, [], "fixed-%d" % n)
        fixed[n] = r["samples_per_s"]
        print("fixed %d worker(s): %.0f samples/s" % (n, fixed[n]), flush=True)
    best_n = max(fixed, key=fixed.get)
    best = fixed[best_n]

    # (b) autoscaled from 1 worker, --repeat times; each run lasts about --seconds
    # at the best fixed rate. "After 60 s" is the mean rate from 60 s to the last
    # period before the run's end (its wind-down left out).
    met = 0
    ratios, lates, besides = [], [], []
    for k in range(args.repeat):
        name = "auto-%d" % k
        # The best count again, just before: the rate this run is judged against.
        beside = goldminer_run(gm, work, path, best_n, 25, best, args.step_s, [],
                               "fixed-%d-before-%d" % (best_n, k))["samples_per_s"]
        goldminer_run(gm, work, path, 1, args.seconds, best, args.step_s,
                      ["--autoscale", "on", "--max-workers", str(args.max_fixed + 1)], name)
        by, events = series(work, name)
        rates, workers = by["samples_per_s"], by["workers"]
        end = rates[-1][0]
        reached = None
        for i in range(len(rates)):  # the mean over the last 10 s up to each point
            window = [v for t, v in rates if rates[i][0] - 10 < t <= rates[i][0]]
            if window and sum(window) / len(window) >= 0.95 * best:
                reached = rates[i][0]
                break
        late = [v for t, v in rates if 60 <= t <= end - 10]
        late_rate = sum(late) / len(late) if late else float("nan")
        most_late = max([v for t, v in workers if 60 <= t <= end - 10] or [0])
        ratio = late_rate / beside
        ratios.append(ratio)
        lates.append(late_rate)
        besides.append(beside)
        ok = ratio >= 0.95 and most_late <= best_n + 1
        met += ok
        print("autoscaled run %d of %d (%.0f s): 95%% of the best fixed rate reached at %s; "
              "after 60 s: %.0f samples/s (%.2fx the best count run just before it, %.0f; "
              "%.2fx the first fixed runs' best), at most %d workers (best fixed: %d)"
              "%s" % (k + 1, args.repeat, end,
                      "%.0f s" % reached if reached is not None else "never", late_rate, ratio,
                      beside, late_rate / best, most_late, best_n,
                      "" if ok else "  <- below the goal"), flush=True)
        changes = [(t, v) for (t, v), (_, before) in zip(workers[1:], workers) if v != before]
        for e in events:
            print("  decision: " + e)
        print("  workers over time: " + ", ".join("%.0f s: %d" % (t, v) for t, v in changes))

    # (c) A trainer that is the bottleneck: 0.2 s per batch of 64 (320 samples/s).
    goldminer_run(gm, work, path, 1, 45, 320, 0.2, ["--autoscale", "on", "--max-workers",
                                                     str(args.max_fixed + 1)], "trainer-bound")
    by_t, events_t = series(work, "trainer-bound")
    added = [e for e in events_t if "above" in e]
    print("trainer-bound, autoscaled: %d worker(s) added, at most %d running; decisions: %s" %
          (len(added), max(v for t, v in by_t["workers"]), events_t or "none"))
    print()
    print("%-32s %12s" % ("run", "samples/s"))
    for n, r in fixed.items():
        print("%-32s %12.0f%s" % ("fixed, %d worker(s)" % n, r, "  <- best" if n == best_n else ""))
    ratios.sort()
    lates.sort()
    besides.sort()
    print("%-32s %12.0f  (median of %d)" % ("fixed, %d worker(s), before each" % best_n,
                                             besides[len(besides) // 2], len(besides)))
    print("%-32s %12.0f  (median of %d; %.2fx the best count run just before, median; "
          "range %.2fx-%.2fx)" % ("autoscaled, after 60 s", lates[len(lates) // 2], len(lates),
                                  ratios[len(ratios) // 2], ratios[0], ratios[-1]))
    print("goal (at least 0.95x the best fixed count after 60 s, at most one worker above it): "
          "met in %d of %d runs" % (met, args.repeat))
    print("(%d CPUs here; trainer step %.0f ms per batch of 64, no CPU)" %
          (os.cpu_count(), args.step_s * 1e3))


if __name__ == "__main__":
    main()
