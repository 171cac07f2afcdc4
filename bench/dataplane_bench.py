#!/usr/bin/python3
"""Benchmark: the data plane, beside its peers, in one run.

(a) Wire speed: one worker's data server sending ready 38 MB batches to one client
    over loopback TCP (bench/wire_bench.cc), beside iperf3 single-stream TCP on the
    same machine. Target: at least 80% of iperf3.
(b) Service cost: images/s a trainer receives from N local worker processes under
    `goldminer run` (bench/consume.py through goldminer.Loader; with the same-host
    shared-memory path, and with it off: loopback TCP), beside the same
    pipeline in-process with N threads (`goldminer worker --local`). Target: the
    service costs under 10%.
(c) Epochs in flight (--epochs E, e.g. 8 epochs of 512 images): the same-host
    service over E short epochs, with the next epoch's splits handed out once the
    current one's are (the default) and with GOLDMINER_EPOCHS_IN_FLIGHT=off (each
    epoch waits for the one before to be read whole), beside in-process over the
    same E epochs; and the trainer's wait at an epoch boundary against its wait
    between two batches. Target: at least 0.9 of in-process, a boundary at most
    one batch's time. (a) and (b) are left out in this mode.
Rounds alternate the runs; medians are printed.

usage: dataplane_bench.py [--build build] [--images 2000] [--rounds 3] [--workers N]
                          [--epochs E]
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def last_json(out):
    return json.loads(out.strip().splitlines()[-1])


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def iperf3_gb_s(seconds=3):
    port = free_port()
    server = subprocess.Popen(["iperf3", "-s", "-1", "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(50):  # the server needs a moment to listen
            r = subprocess.run(["iperf3", "-c", "127.0.0.1", "-p", str(port), "-t", str(seconds),
                                "-J"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            if r.returncode == 0:
                try:
                    return json.loads(r.stdout)["end"]["sum_received"]["bits_per_second"] / 8e9
                except (ValueError, KeyError):
                    pass  # e.g. it connected before the server was ready: try again
            time.sleep(0.1)
        raise SystemExit("dataplane_bench: iperf3 did not run (apt-get install iperf3)")
    finally:
        server.wait(timeout=30)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--images", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--wire-bench", help="the wire_bench binary to time (default: the build's);"
                    " e.g. one built from an earlier commit, to compare")
    ap.add_argument("--epochs", type=int, default=0,
                    help="(c) only: E short epochs, in flight together and not")
    args = ap.parse_args()
    gm = os.path.join(args.build, "cmd", "goldminer")
    work = os.path.join(args.build, "bench")
    corpus = os.path.join(work, f"corpus-{args.images}")
    subprocess.run([sys.executable, os.path.join(HERE, "make_corpus.py"), corpus, "--count",
                    str(args.images)], check=True)
    with open(os.path.join(ROOT, "examples", "imagenet", "pipeline.json")) as f:
        spec = json.load(f)
    spec["source"]["root"] = os.path.abspath(corpus)
    pipeline = os.path.join(work, "pipeline.json")
    with open(pipeline, "w") as f:
        json.dump(spec, f, indent=1)

    if args.epochs > 0:
        return epochs_in_flight(args, gm, pipeline)
    runs = {"wire": [], "iperf3": [], "service": [], "service_tcp": [], "inproc": [],
            "cpu_ms": [], "cpu_ms_tcp": []}
    for r in range(args.rounds):
        print(f"round {r + 1}/{args.rounds} ...", file=sys.stderr)
        wire = subprocess.run([args.wire_bench or os.path.join(args.build, "bench", "wire_bench"),
                               "--rounds", "3"],
                              check=True, stdout=subprocess.PIPE, text=True).stdout
        runs["wire"].append(last_json(wire)["median_gb_s"])
        runs["iperf3"].append(iperf3_gb_s())
        out = subprocess.run([gm, "-q", "run", "--no-db", "--pipeline", pipeline, "--workers",
                              str(args.workers), "--", "/usr/bin/python3",
                              os.path.join(HERE, "consume.py")],
                             check=True, stdout=subprocess.PIPE, text=True).stdout
        runs["service"].append(last_json(out)["images_per_s"])
        runs["cpu_ms"].append(1e3 * last_json(out)["cpu_s"] / max(1, last_json(out)["batches"]))
        # The same with the same-host path off: batches over loopback TCP.
        out = subprocess.run([gm, "-q", "run", "--no-db", "--pipeline", pipeline, "--workers",
                              str(args.workers), "--", "/usr/bin/python3",
                              os.path.join(HERE, "consume.py")],
                             check=True, stdout=subprocess.PIPE, text=True,
                             env=dict(os.environ, GOLDMINER_SAME_HOST="off")).stdout
        runs["service_tcp"].append(last_json(out)["images_per_s"])
        runs["cpu_ms_tcp"].append(1e3 * last_json(out)["cpu_s"] / max(1, last_json(out)["batches"]))
        out = subprocess.run([gm, "worker", "--local", "--pipeline", pipeline, "--threads",
                              str(args.workers), "--json", "--no-progress"],
                             check=True, stdout=subprocess.PIPE, text=True).stdout
        runs["inproc"].append(last_json(out)["samples_per_s"])
    med = {k: statistics.median(v) for k, v in runs.items()}
    print()
    print(f"(a) loopback TCP, 38 MB batches, {args.rounds} rounds, medians")
    print(f"    goldminer worker -> client: {med['wire']:.2f} GB/s; iperf3 single stream: "
          f"{med['iperf3']:.2f} GB/s; ratio {med['wire'] / med['iperf3']:.2f}")
    print(f"(b) ImageNet pipeline, {args.images} images, {args.workers} workers/threads, medians")
    print(f"    via the service (goldminer run + Loader), same-host path: {med['service']:.1f} "
          f"images/s ({med['service'] / med['inproc']:.2f} of in-process); over TCP "
          f"(GOLDMINER_SAME_HOST=off): {med['service_tcp']:.1f} images/s "
          f"({med['service_tcp'] / med['inproc']:.2f}); in-process (worker --local): "
          f"{med['inproc']:.1f} images/s")
    print(f"    the trainer process's CPU per batch (client threads included): same host "
          f"{med['cpu_ms']:.2f} ms, TCP {med['cpu_ms_tcp']:.2f} ms")
    print("    per round: " + "; ".join(f"{k} {', '.join(f'{x:.2f}' if k.startswith('cpu') else f'{x:.0f}' for x in v)}"
                                        for k, v in runs.items() if k in ("service", "service_tcp", "inproc",
                                                                 "cpu_ms", "cpu_ms_tcp")))


def epochs_in_flight(args, gm, pipeline):
    runs = {"in_flight": [], "one_at_a_time": [], "inproc": [], "batch_s": [], "boundary_s": [],
            "batch_s_off": [], "boundary_s_off": [], "in_flight_after_first": [],
            "one_at_a_time_after_first": []}
    consume = ["--", "/usr/bin/python3", os.path.join(HERE, "consume.py"), "--epochs",
               str(args.epochs)]
    for r in range(args.rounds):
        print(f"round {r + 1}/{args.rounds} ...", file=sys.stderr)
        for mode, key in (("on", ""), ("off", "_off")):
            out = last_json(subprocess.run(
                [gm, "-q", "run", "--no-db", "--pipeline", pipeline, "--workers",
                 str(args.workers)] + consume, check=True, stdout=subprocess.PIPE, text=True,
                env=dict(os.environ, GOLDMINER_EPOCHS_IN_FLIGHT=mode)).stdout)
            name = "in_flight" if mode == "on" else "one_at_a_time"
            runs[name].append(out["images_per_s"])
            runs[name + "_after_first"].append(out["after_first_images_per_s"])
            runs["batch_s" + key].append(out["batch_s"])
            runs["boundary_s" + key].append(out["boundary_s"])
        out = subprocess.run([gm, "worker", "--local", "--pipeline", pipeline, "--threads",
                              str(args.workers), "--epochs", str(args.epochs), "--json",
                              "--no-progress"],
                             check=True, stdout=subprocess.PIPE, text=True).stdout
        runs["inproc"].append(last_json(out)["samples_per_s"])
    med = {k: statistics.median(v) for k, v in runs.items()}
    print()
    print(f"(c) ImageNet pipeline, {args.epochs} epochs of {args.images} images, "
          f"{args.workers} workers/threads, same-host path, {args.rounds} rounds, medians")
    print(f"    epochs in flight: {med['in_flight']:.1f} images/s "
          f"({med['in_flight'] / med['inproc']:.2f} of in-process); one at a time "
          f"(GOLDMINER_EPOCHS_IN_FLIGHT=off): {med['one_at_a_time']:.1f} "
          f"({med['one_at_a_time'] / med['inproc']:.2f}); in-process: {med['inproc']:.1f}")
    print(f"    from the trainer's first batch on (the run's start left out): in flight "
          f"{med['in_flight_after_first']:.1f} "
          f"({med['in_flight_after_first'] / med['inproc']:.2f}); one at a time "
          f"{med['one_at_a_time_after_first']:.1f} "
          f"({med['one_at_a_time_after_first'] / med['inproc']:.2f})")
    print(f"    the trainer's wait at an epoch boundary / between two batches: in flight "
          f"{med['boundary_s']:.3f} / {med['batch_s']:.3f} s "
          f"({med['boundary_s'] / med['batch_s']:.2f} batches); one at a time "
          f"{med['boundary_s_off']:.3f} / {med['batch_s_off']:.3f} s "
          f"({med['boundary_s_off'] / med['batch_s_off']:.2f} batches)")
    print("    per round: " + "; ".join(f"{k} {', '.join(f'{x:.3f}' if 'batch' in k or 'boundary' in k else f'{x:.0f}' for x in v)}"
                                        for k, v in runs.items()))


if __name__ == "__main__":
    main()
