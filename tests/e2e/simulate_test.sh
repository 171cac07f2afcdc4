#!/usr/bin/env bash
# End-to-end: `goldminer simulate` on the shipped trace (Alibaba's v2023 pod and node
# lists, data/alibaba-gpu-v2023) at the paper's scale (--gpus 64), its page from
# `goldminer report --sim` in headless Chromium, the same sim.json byte for byte
# for the same seed, and bad inputs refused with the file and line named and
# nothing written. Needs Chromium: the suite fails, never skips, without.
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
expect_rc 2 "an unknown flag is a usage error" -- "$GM" simulate --trace "$PODS" --frobnicate
expect_rc 0 "simulate --help" -- "$GM" simulate --help
expect_in "$T/out" "--min-worker-lifetime" "--help lists every flag"
done_suite
