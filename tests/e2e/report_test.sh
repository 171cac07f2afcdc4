#!/usr/bin/env bash
# End-to-end: `goldminer report` on a runs.db that real runs wrote, read in a real
# browser. Headless Chromium opens the HTML page (file://, offline): the DOM has
# each chart with as many points as the record has samples, a mark per autoscaler
# decision with its reason, the workers and events tables, no script at all, and a
# run named <script>alert(1)</script> shown as text. A screenshot is kept
# (GM_REPORT_SCREENSHOT=PATH keeps it there). Text and JSON are checked too; a
# report of a run still going, and of one killed, say so; bad input: a missing
# file, a foreign SQLite database, a newer schema, an unknown run or profile.
source "$(dirname "$0")/lib.sh"
command -v sqlite3 >/dev/null || fail "sqlite3 is missing: run scripts/install-deps.sh"
CHROMIUM=$(command -v chromium || command -v chromium-browser) ||
  fail "chromium is missing: run scripts/install-deps.sh (the report is checked in a real browser)"
slow_pipeline "$T/pipeline.json"
DB=$T/runs.db
export GM_TEST_GOLDMINER=$GM

# chrome ARGS...: headless Chromium as root, nothing from the network, a profile of its own.
chrome() {
  timeout 120 "$CHROMIUM" --headless=new --no-sandbox --disable-gpu --no-first-run \
    --disable-extensions --disable-background-networking --user-data-dir="$T/chrome" \
    --enable-logging=stderr --v=0 "$@"
}

# 1. Real runs: an autoscaled, input-bound one (decisions to mark), and one whose
#    name is markup.
expect_rc 0 "an autoscaled run" -- "$GM" run --pipeline "$T/pipeline.json" --workers 1 \
  --autoscale on --min-workers 1 --max-workers 3 --scale-period 1 --sample-interval 0.25 \
  --samples-per-split 40 --db "$DB" --name scaled -- $PY "$SRC/tests/e2e/trainer.py" "$T/a.json" 3
expect_rc 0 "a run named <script>alert(1)</script>" -- "$GM" run --pipeline "$T/pipeline.json" \
  --workers 1 --samples-per-split 40 --sample-interval 0.25 --db "$DB" \
  --name '<script>alert(1)</script>' -- $PY "$SRC/tests/e2e/trainer.py" "$T/b.json" 1
points=$(sqlite3 "$DB" "SELECT count(*) FROM metrics WHERE run_id = 'scaled' AND name = 'samples_per_s'")
decisions=$(sqlite3 "$DB" "SELECT count(*) FROM events WHERE run_id = 'scaled' AND kind = 'scale'")
[[ $points -ge 4 && $decisions -ge 1 ]] || fail "the autoscaled run recorded $points points, $decisions decisions"
ok "runs.db holds two runs ($points points and $decisions decision(s) in the autoscaled one)"

# 2. The page, in Chromium.
expect_rc 0 "report --run all" -- "$GM" report --db "$DB" --run all -o "$T/report.html"
expect_in "$T/err" "wrote $T/report.html (2 run(s))" "report says where the page is"
chrome --dump-dom "file://$T/report.html" >"$T/dom.html" 2>"$T/chrome.log" ||
  { cat "$T/chrome.log" >&2; fail "chromium could not open the page"; }
$PY - "$T/dom.html" "$points" "$decisions" <<'CHECK' || fail "the page's DOM is not what the record holds"
import sys
from html.parser import HTMLParser

dom, points, decisions = open(sys.argv[1]).read(), int(sys.argv[2]), int(sys.argv[3])

class Dom(HTMLParser):
    def __init__(self):
        super().__init__()
        self.elements, self.text, self.scripts = [], [], 0
    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))
        self.scripts += tag == "script"
    def handle_data(self, data):
        self.text.append(data)

d = Dom()
d.feed(dom)
by_id = {a.get("id"): (t, a) for t, a in d.elements if a.get("id")}
for chart in ("chart-throughput-0", "chart-workers-0", "chart-throughput-1", "chart-workers-1"):
    assert chart in by_id, f"{chart} missing"
assert by_id["chart-throughput-0"][1]["data-points"] == str(points), by_id["chart-throughput-0"]
lines = [a for t, a in d.elements if t == "polyline" and a.get("class") == "rate"]
assert lines and lines[0]["data-points"] == str(points), lines[:1]
assert len(lines[0]["points"].split()) == points, "the drawn line has one vertex per point"
assert by_id["chart-workers-0"][1]["data-decisions"] == str(decisions), by_id["chart-workers-0"]
marks = [a for t, a in d.elements if t == "g" and a.get("class") == "decision"]
assert len(marks) == decisions, (len(marks), decisions)
text = "".join(d.text)
assert "above 10%" in text and "): adding " in text, "a decision's reason is on the page (its hover title)"
assert d.scripts == 0, "the page holds no script"
assert "<script>alert(1)</script>" in text, "the markup name is shown as text"
assert any(t == "table" and a.get("class") == "compare" for t, a in d.elements)
assert any(t == "table" and a.get("class") == "workers" for t, a in d.elements)
assert any(t == "table" and a.get("class") == "events" for t, a in d.elements)
CHECK
ok "Chromium: charts with one point per sample, $decisions decision mark(s) with reasons, tables"
ok "the run named <script>alert(1)</script> is text, and the page runs no script"
! grep -E "CONSOLE|Uncaught|net::ERR_|Failed to load resource" "$T/chrome.log" >/dev/null ||
  fail "Chromium reported page errors: $(grep -E "CONSOLE|Uncaught|net::ERR_|Failed to load resource" "$T/chrome.log")"
ok "no console or loading errors"
shot=${GM_REPORT_SCREENSHOT:-$T/report.png}
chrome --screenshot="$shot" --window-size=1100,2600 "file://$T/report.html" >/dev/null 2>"$T/chrome.log" ||
  { cat "$T/chrome.log" >&2; fail "chromium could not take a screenshot"; }
[[ $(stat -c %s "$shot") -gt 20000 ]] || fail "the screenshot $shot is nearly empty"
ok "a screenshot of the page ($shot, $(stat -c %s "$shot") bytes)"
! grep -qiE '(src|href)="(https?:)?//' "$T/report.html" || fail "the page fetches something"
ok "the page is self-contained (no src or href to elsewhere)"

# 3. Text and JSON.
expect_rc 0 "report --format text" -- "$GM" report --db "$DB" --run scaled --format text
expect_in "$T/out" "run scaled: succeeded" "text: the run and its outcome"
expect_in "$T/out" "autoscaler decision(s)" "text: workers and decisions"
expect_rc 0 "report --format json" -- "$GM" report --db "$DB" --run scaled --format json
$PY - "$T/out" "$points" "$decisions" <<'CHECK' || fail "the JSON is not the record"
import json, sys
j = json.load(open(sys.argv[1]))
assert (j["schema"], j["version"]) == ("goldminer.report", 1)
run = j["runs"][0]
assert run["run"]["id"] == "scaled" and run["run"]["status"] == "succeeded"
assert run["series"]["samples_per_s"]["points_recorded"] == int(sys.argv[2])
assert sum(e["kind"] == "scale" for e in run["events"]) == int(sys.argv[3])
assert run["summary"]["workers_peak"] >= 2 and run["summary"]["samples_per_s_mean"] > 0
CHECK
ok "json: versioned, with the run, its series, events and summary"

# 4. A run still going, and one killed: the report says which.
GM_TEST_STEP_S=0.2 "$GM" run --pipeline "$T/pipeline.json" --workers 1 --samples-per-split 40 \
  --sample-interval 0.25 --db "$DB" --name live -- $PY "$SRC/tests/e2e/trainer.py" "$T/c.json" 3 \
  >/dev/null 2>&1 &
live=$!
for _ in $(seq 1 100); do
  [[ $(sqlite3 "$DB" "SELECT count(*) FROM metrics WHERE run_id = 'live'" 2>/dev/null) -ge 10 ]] && break
  sleep 0.1
done
expect_rc 0 "report of a run in progress" -- "$GM" report --db "$DB" --run live --format text
expect_in "$T/out" "run live: running" "a run in progress is reported as running"
kill -9 $live
wait $live 2>/dev/null
sqlite3 "$DB" "UPDATE runs SET heartbeat_utc = '2026-01-01T00:00:00Z' WHERE id = 'live'"
expect_rc 0 "report of a run killed" -- "$GM" report --db "$DB" --run live --format text
expect_in "$T/out" "did not finish (no sign of life since 2026-01-01T00:00:00Z)" \
  "a run killed with SIGKILL is reported as not finished"
pkill -f "$T/c.json" 2>/dev/null || true

# 5. Bad input: a clear message and a non-zero exit status.
expect_rc 1 "a missing runs.db" -- "$GM" report --db "$T/nope.db"
expect_in "$T/err" "$T/nope.db does not exist" "missing: named"
[[ ! -e $T/nope.db ]] || fail "report created $T/nope.db"
sqlite3 "$T/foreign.db" "CREATE TABLE t (a)"
expect_rc 1 "a foreign SQLite database" -- "$GM" report --db "$T/foreign.db"
expect_in "$T/err" "is not a goldminer runs.db" "foreign: named"
[[ $(sqlite3 "$T/foreign.db" ".tables") == t ]] || fail "report changed the foreign database"
cp "$DB" "$T/newer.db"
sqlite3 "$T/newer.db" "PRAGMA user_version = 99"
expect_rc 1 "a runs.db of a newer schema" -- "$GM" report --db "$T/newer.db"
expect_in "$T/err" "written by a newer goldminer (schema 99" "newer: both versions named"
echo "not a database at all, just text" >"$T/text.db"
expect_rc 1 "a file that is not a database" -- "$GM" report --db "$T/text.db"
expect_in "$T/err" "is not a goldminer runs.db" "not a database: named"
expect_rc 1 "an unknown run" -- "$GM" report --db "$DB" --run nosuch
expect_in "$T/err" "has no run \"nosuch\"; its runs: scaled" "unknown run: the runs are listed"
expect_rc 1 "an unknown profile" -- "$GM" report --db "$DB" --profile 42
expect_in "$T/err" "has no profile 42" "unknown profile: named"
expect_rc 2 "an unknown format" -- "$GM" report --db "$DB" --format pdf
done_suite
