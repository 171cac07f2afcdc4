#!/usr/bin/env bash
# End-to-end: `goldminer simulate` on the shipped trace (Alibaba's v2023 pod and node
# lists, data/alibaba-gpu-v2023) at the paper's scale (--gpus 64), its page from
# `goldminer report --sim` in headless Chromium, the same sim.json byte for byte
# for the same seed, and bad inputs refused with the file and line named and
# nothing written; the figures over the submission window, the record in runs.db
# (report --sim ID), and curve families from goldminer profiles. Needs Chromium:
# the suite fails, never skips, without.
source "$(dirname "$0")/lib.sh"
cd "$T" || fail "cd $T"
DATA=$SRC/data/alibaba-gpu-v2023
PODS=$DATA/openb_pod_list_default.csv
NODES=$DATA/openb_node_list_gpu_node.csv

# 1. The shipped trace on 64 GPUs, twice as fast as it came, every policy.
expect_rc 0 "simulate replays the shipped trace on 64 GPUs" -- \
  "$GM" simulate --trace "$PODS" --nodes "$NODES" --gpus 64 --load 2 -o "$T/a.json"
for policy in static job cluster; do
  expect_in "$T/out" " $policy " "the comparison has a row for $policy"
done
expect_in "$T/out" "cluster against static: average JCT" "the comparison says the ratios"
expect_in "$T/err" "events/s" "the events per second are said"
$PY - "$T/a.json" <<'PY' || fail "sim.json: $(head -c 2000 "$T/a.json")"
import json, sys
sim = json.load(open(sys.argv[1]))
assert sim["schema"] == "goldminer.sim" and sim["version"] == 1, sim.get("schema")
inputs = sim["inputs"]
assert inputs["gpus"] >= 64 and inputs["never_scheduled"] == 897, inputs
assert inputs["tasks"] + inputs["dropped"] == 7255, inputs
assert [p["policy"] for p in sim["policies"]] == ["static", "job", "cluster"]
for p in sim["policies"]:
    assert p["gpu_tasks"] + p["cpu_tasks"] == inputs["tasks"], p["policy"]
    assert p["events"] == 2 * inputs["tasks"], p["policy"]
    assert 0 < p["gpu_util_effective"] <= p["gpu_util_allocated"] <= 1, p["policy"]
    assert p["jct_p50_s"] <= p["jct_p95_s"] <= p["jct_p99_s"], p["policy"]
    assert len(p["series"]) == 100, p["policy"]
cluster = sim["policies"][2]
assert cluster["worker_cpus_started"] > 0, cluster
assert sim["ratios"]["jct_static_over_cluster"] > 0, sim["ratios"]
assert len(sim["assumptions"]) >= 5
PY
ok "sim.json holds every policy's figures, series and the ratios"

# 2. The report of it, in a real browser.
CHROMIUM=$(command -v chromium || command -v chromium-browser) ||
  fail "chromium is missing: run scripts/install-deps.sh (the report is checked in a real browser)"
expect_rc 0 "report --sim renders the simulation" -- "$GM" report --sim "$T/a.json" -o "$T/sim.html"
timeout 120 "$CHROMIUM" --headless=new --no-sandbox --disable-gpu --no-first-run \
  --disable-extensions --disable-background-networking --user-data-dir="$T/chrome" \
  --dump-dom "file://$T/sim.html" >"$T/dom.html" 2>"$T/chrome.log" ||
  { cat "$T/chrome.log" >&2; fail "chromium could not open the page"; }
$PY - "$T/dom.html" <<'PY' || fail "the simulation's page is not what sim.json holds"
import sys
from html.parser import HTMLParser

class Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids, self.rows, self.lines, self.items, self.where = {}, 0, {}, 0, []
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids[a["id"]] = a
            self.where.append(a["id"])
        if tag == "tr" and self.where and self.where[-1] == "sim-compare":
            self.rows += 1
        if tag == "li" and self.where and self.where[-1] == "sim-assumptions":
            self.items += 1
        if tag == "polyline" and self.where and self.where[-1].startswith("chart-"):
            self.lines[self.where[-1]] = self.lines.get(self.where[-1], 0) + 1

page = Page()
page.feed(open(sys.argv[1]).read())
assert page.rows == 4, f"{page.rows} rows: a header and static, job, cluster"
assert page.lines == {"chart-queue": 3, "chart-gpu": 3}, page.lines
assert page.ids["chart-queue"]["data-lines"] == "3", page.ids["chart-queue"]
assert page.items >= 5, page.items
assert "sim-ratios" in page.ids
PY
ok "the page shows the policies, queue and GPU utilization over time and the assumptions"
printf '{"schema": "goldminer.plan", "version": 1}\n' >"$T/notsim.json"
expect_rc 1 "report --sim refuses what is not a sim.json" -- "$GM" report --sim "$T/notsim.json" -o "$T/x.html"
expect_in "$T/err" "not a sim.json of version 1" "the refusal says what it expected"

# 3. The same seed, the same bytes; another seed, another family mix.
expect_rc 0 "simulate again with the same seed" -- \
  "$GM" simulate --trace "$PODS" --nodes "$NODES" --gpus 64 --load 2 -o "$T/b.json"
cmp -s "$T/a.json" "$T/b.json" || fail "the same seed wrote another sim.json"
ok "the same seed writes the same sim.json, byte for byte"
expect_rc 0 "simulate with another seed" -- \
  "$GM" simulate --trace "$PODS" --nodes "$NODES" --gpus 64 --load 2 --seed 2 -o "$T/c.json"
cmp -s "$T/a.json" "$T/c.json" && fail "another seed wrote the same sim.json"
ok "another seed draws other nodes and another mix"

# 4. Bad input: exit 1, the file and line named, nothing written.
printf 'submit_s,duration_s,gpus\n0,10,1\n' >"$T/nocol.csv"
printf 'submit_s,duration_s,gpus,cpus\n0,10,1,2\n-3,10,1,2\n' >"$T/negative.csv"
printf 'submit_s,duration_s,gpus,cpus\n0,10,1,2\n5,10,64,2\n' >"$T/big.csv"
printf 'submit_s,duration_s,gpus,cpus\n' >"$T/empty.csv"
printf 'name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\np,1000,1,1,1000,,LS,Running,10,20,30\n' >"$T/reversed.csv"
for c in "nocol.csv:1: no column \"cpus\"" "negative.csv:3: submit_s is negative" \
         "big.csv:3: task-3 (64.000000 GPUs" "empty.csv: no task to replay" \
         "reversed.csv:2: deletion_time is not after scheduled_time"; do
  file=${c%%:*}
  expect_rc 1 "$file is refused" -- \
    "$GM" simulate --trace "$T/$file" --nodes "$NODES" -o "$T/never.json"
  expect_in "$T/err" "$c" "$file: the error names the file and line"
  [[ ! -e $T/never.json ]] || fail "$file: sim.json was written"
done
ok "nothing is written on bad input"
printf '{"families": [{"name": "flat", "cpus_per_gpu": 1, "share": 1}]}\n' >"$T/flat.json"
expect_rc 0 "simulate with one curve family of its own" -- \
  "$GM" simulate --trace "$PODS" --nodes "$NODES" --gpus 64 --curves "$T/flat.json" -o "$T/flat.sim.json"
$PY - "$T/flat.sim.json" <<'PY' || fail "the curves file was not used"
import json, sys
sim = json.load(open(sys.argv[1]))
assert [f["name"] for f in sim["options"]["families"]] == ["flat"], sim["options"]
PY
ok "the families of --curves are the ones replayed"
printf '{"families": [{"name": "x", "cpus_per_gpu": 0, "share": 1}]}\n' >"$T/badcurves.json"
expect_rc 1 "a bad curves file is refused" -- \
  "$GM" simulate --trace "$PODS" --nodes "$NODES" --curves "$T/badcurves.json" -o "$T/never.json"
expect_in "$T/err" "badcurves.json: \$.families[0].cpus_per_gpu" "the refusal names the JSON path"
# 5. The submission window, runs.db, and families from goldminer profiles.
$PY - "$T/a.json" <<'PY' || fail "sim.json has no figures over the submission window"
import json, sys
sim = json.load(open(sys.argv[1]))
for p in sim["policies"]:
    assert 0 < p["window_s"] < p["makespan_s"], p["policy"]
    assert 0 < p["gpu_util_effective_window"] <= p["gpu_util_allocated_window"] <= 1, p["policy"]
assert sim["ratios"]["gpu_util_effective_window_cluster_over_static"] > 0, sim["ratios"]
PY
ok "sim.json has GPU utilization over the submission window too, and its ratio"
expect_rc 0 "simulate --db records the simulation" -- "$GM" simulate --trace "$PODS" \
  --nodes "$NODES" --gpus 64 --load 2 -o "$T/d.json" --db "$T/runs.db"
expect_in "$T/err" "recorded as simulation 1 in $T/runs.db" "it says where"
[[ $(sqlite3 "$T/runs.db" "SELECT count(*) FROM simulations WHERE gpus >= 64 AND policies = 'static,job,cluster'") == 1 ]] ||
  fail "no simulations row: $(sqlite3 "$T/runs.db" "SELECT id, gpus, policies FROM simulations")"
$PY - "$T/runs.db" "$T/d.json" <<'PY' || fail "the row is not the sim.json written"
import json, sqlite3, sys
row = sqlite3.connect(sys.argv[1]).execute(
    "SELECT json, jct_static_over_cluster FROM simulations WHERE id = 1").fetchone()
assert json.loads(row[0]) == json.load(open(sys.argv[2]))
assert abs(row[1] - json.loads(row[0])["ratios"]["jct_static_over_cluster"]) < 1e-12
PY
ok "runs.db holds the whole sim.json and its ratios"
expect_rc 0 "report --sim latest reads it from runs.db" -- "$GM" report --db "$T/runs.db" --sim latest --format text
expect_in "$T/out" "submission window" "the text report says the submission window"
expect_in "$T/out" "cluster against static: average JCT" "and the ratios"
expect_rc 1 "report --sim of an id not recorded" -- "$GM" report --db "$T/runs.db" --sim 9 --format text
expect_in "$T/err" "no simulation with id 9" "the refusal names the id"
mkdir -p "$T/profiles"
profile() {  # profile FILE DEMAND CPU_S_PER_SAMPLE: a profile of a pipeline and its trainer
  cat >"$1" <<JSON
{"schema": "goldminer.profile", "version": 1, "created_utc": "2026-12-03T12:00:00Z",
 "host": "dev", "cores": 4, "verdict": "input-bound", "input_bound_fraction": 0.5,
 "pipeline": {"path": "p.json", "batch_size": 4, "samples": 100, "cpu_s_per_sample": $3,
   "samples_per_s_per_core": 100, "peak_rss_bytes": 1048576, "runs": [],
   "stages": [{"index": 0, "name": "decode", "cpu_s_per_sample": $3,
               "bytes_in_per_sample": 20000, "bytes_out_per_sample": 3072}]},
 "trainer": {"command": ["/bin/true"], "steps": 10, "seconds": 1, "samples_per_s": 100,
   "batch_size": 4, "step_s_median": 0.01, "wait_s_median": 0.005,
   "compute_s_median": 0.005, "demand_samples_per_s": $2, "stall_fraction": 0.5,
   "gpu": {"available": false}, "step_list": []}}
JSON
}
profile "$T/profiles/resnet.json" 800 0.01
profile "$T/profiles/bert.json" 2000 0.001
expect_rc 0 "simulate --profiles takes its families from goldminer profiles" -- \
  "$GM" simulate --trace "$PODS" --nodes "$NODES" --gpus 64 --profiles "$T/profiles" -o "$T/p.json"
$PY - "$T/p.json" <<'PY' || fail "the profiles were not the families: $(head -c 1500 "$T/p.json")"
import json, sys
f = {x["name"]: x for x in json.load(open(sys.argv[1]))["options"]["families"]}
assert sorted(f) == ["bert", "resnet"], f
assert abs(f["resnet"]["cpus_per_gpu"] - 8) < 1e-9 and f["resnet"]["samples_per_s_per_gpu"] == 800, f
assert abs(f["bert"]["cpus_per_gpu"] - 2) < 1e-9 and f["bert"]["bytes_per_sample"] == 3072, f
assert f["bert"]["share"] == f["resnet"]["share"] == 0.5, f
PY
ok "each profile is a family: its demand, demand x CPU per sample, equal shares"
sed -i 's/"demand_samples_per_s": 2000/"demand_samples_per_s": 0/' "$T/profiles/bert.json"
expect_rc 1 "a profile without a trainer's demand is refused" -- \
  "$GM" simulate --trace "$PODS" --nodes "$NODES" --profiles "$T/profiles" -o "$T/never.json"
expect_in "$T/err" "bert.json: no trainer demand" "the refusal names the profile"
expect_rc 1 "--curves and --profiles together are refused" -- "$GM" simulate --trace "$PODS" \
  --nodes "$NODES" --curves "$T/flat.json" --profiles "$T/profiles" -o "$T/never.json"
[[ ! -e $T/never.json ]] || fail "sim.json was written on bad input"
expect_rc 2 "an unknown flag is a usage error" -- "$GM" simulate --trace "$PODS" --frobnicate
expect_rc 0 "simulate --help" -- "$GM" simulate --help
expect_in "$T/out" "--min-worker-lifetime" "--help lists every flag"
done_suite
