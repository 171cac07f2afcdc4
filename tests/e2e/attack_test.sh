#!/usr/bin/env bash
# End-to-end: a live `goldminer run` under attack (goldminer-protocol(7), THREAT
# MODEL). While a trainer reads two epochs, tests/e2e/gmp_peer.py connects and
# closes 20,000 times (and 10,000 at a data port), holds 1,000 idle connections, stalls inside a frame, sends
# a SUBSCRIBE with a string rank, a second SUBSCRIBE for a live rank, SPLIT_DONE
# lies from a registered worker, a 60 MiB control frame, a role full of terminal
# escapes, replayed, unsealed and tampered frames, the trainer's key claiming the
# worker role, and data connections without a valid ticket. The trainer still gets
# every sample exactly once; the coordinator's threads and memory stay bounded
# (printed); each attack is refused or harmless.
source "$(dirname "$0")/lib.sh"

cat >"$T/pipeline.json" <<'JSON'
{"version": 1, "source": {"type": "range", "count": 4096}, "stages": [],
 "batch": {"size": 16}, "shuffle": true, "seed": 3}
JSON
CHURN=${GM_ATTACK_CHURN:-20000} IDLE=${GM_ATTACK_IDLE:-1000}
expect_rc 0 "a run under attack ends normally" -- "$GM" run --backend local --pipeline "$T/pipeline.json" \
  --workers 2 --liveness-timeout 5 -- $PY "$SRC/tests/e2e/attack_trainer.py" "$T/r.json" 2 "$CHURN" "$IDLE"
cp "$T/err" "$T/run.err"

# field EXPR: a Python expression over the result `r`.
check() {
  $PY -c "import json,sys; r=json.load(open(sys.argv[1])); sys.exit(0 if ($1) else 1)" "$T/r.json" ||
    { $PY -c "import json,sys; r=json.load(open(sys.argv[1])); r.pop('epochs'); print(json.dumps(r, indent=1))" "$T/r.json" >&2
      fail "$2: ($1) is false"; }
  ok "$2"
}
check "all(sorted(e) == sorted(set(e)) and len(e) == 4096 for e in r['epochs'])" \
  "every sample of both epochs reached the trainer exactly once"
$PY -c "import json,sys; r=json.load(open(sys.argv[1])); print('# goldminer run: idle %d threads, %d MiB; under attack at most %d threads, %d MiB' % (r['idle_threads'], r['idle_rss_kib'] // 1024, r['max_threads'], r['max_rss_kib'] // 1024)); print('# attacks:', json.dumps(r['attacks']))" "$T/r.json"
# Bounds (goldminer-protocol(7)): connections that have not answered HELLO wait in
# a lobby with no thread; one thread per connection that did, at most 1024 (64 of
# them in their handshake), on top of the run's own threads;
# memory well under what one 60 MiB frame would have cost per attempt.
check "r['max_threads'] <= r['idle_threads'] + 1024" "threads stay within the 1024 connections' bound under attack"
check "r['max_rss_kib'] < r['idle_rss_kib'] + 64 * 1024" "memory grows by less than 64 MiB under attack"
check "r['attacks']['churn']['cycles'] == $CHURN" "$CHURN connect/close cycles done"
check "r['attacks']['handshakes']['refused'] == 0" "300 legitimate handshakes beside the churn (two processes) and the idle flood, dialled as our clients dial: none failed"
# The lobby's bound (dataplane/handshake_gate.h): a fifth of the descriptor limit
# goldminer raises its soft limit to, less 128, from 4 to 256. Connections past it
# are closed; the rest wait for the handshake deadline.
LOBBY=$(( ($(ulimit -Hn) - 128) / 5 )); (( LOBBY > 256 )) && LOBBY=256; (( LOBBY < 4 )) && LOBBY=4
check "r['attacks']['idle']['open_at_4_5_s'] <= $LOBBY and r['attacks']['idle']['closed_by_server'] + r['attacks']['idle']['open_at_4_5_s'] + r['attacks']['idle']['never_answered'] == $IDLE" \
  "of $IDLE idle connections, at most the lobby's $LOBBY were held past 4.5 s; the others were closed by the bound, not the deadline"
check "r['attacks']['bad-subscribe']['answer'][0] == 4 and 'SUBSCRIBE: \$.rank: expected an integer' in r['attacks']['bad-subscribe']['answer'][1]['message']" "SUBSCRIBE with a string rank: refused with an error naming the field, and the run goes on"
check "r['attacks']['second-rank0']['answer'][0] == 4 and 'already subscribed' in r['attacks']['second-rank0']['answer'][1]['message']" "a second client for a live rank is refused"
check "r['attacks']['fake-split-done']['answer'][0] == 'closed'" "a worker that lies in SPLIT_DONE about a split's size is dropped (and the run goes on)"
check "r['attacks']['big-payload']['answer'][0] == 'closed' or 'payload' in r['attacks']['big-payload']['answer'][1]['message']" "a 60 MiB control frame is refused at its header"
check "'refused' in r['attacks']['escape-role']['answer'] or 'authentication' in r['attacks']['escape-role']['answer']" "a wrong secret is refused"
if grep -q $'\x1b' "$T/run.err"; then fail "a terminal escape reached the log"; fi
ok "no terminal escape reached the log"
expect_in "$T/run.err" '\x1b[31mred' "the escaped role is shown readably"
check "r['attacks']['slow']['answer'][0] == 'closed' and r['attacks']['slow']['seconds'] < 30" "a frame that stalls after its first byte is cut off"
check "len(r['attacks']['data-ports']) == 2 and 'authentication failed' in r['attacks']['data-hijack']['answer']" "a client without a ticket is refused at a data port"
check "'authentication failed' in r['attacks']['forged-ticket']['answer']" "a ticket made up with the client key is refused at a data port"
check "'authentication failed' in r['attacks']['client-as-worker']['answer']" "the trainer's key cannot act as a worker"
$PY -c "import json,sys; r=json.load(open(sys.argv[1])); print('# data workers: %d threads idle, at most %d under a churn at a data port' % (r['worker_idle_threads'], r['worker_max_threads']))" "$T/r.json"
check "r['attacks']['data-churn']['cycles'] == $CHURN // 2" "$((CHURN / 2)) connect/close cycles at a data port done, the trainer reading through it"
check "r['worker_max_threads'] <= r['worker_idle_threads'] + 64" "a churn at a data port costs its worker no thread per connection (at most the 64 of the handshake bound)"
check "r['attacks']['replay']['first'] == 20" "a sealed GET_SPLIT is answered (ASSIGN)"
for a in replay unsealed tamper; do
  check "r['attacks']['$a']['answer'][0] == 'closed'" "a $a control frame ends the connection"
done
done_suite
