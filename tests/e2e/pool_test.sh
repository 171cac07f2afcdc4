#!/usr/bin/env bash
# End-to-end: `goldminer pool`, the service that divides a cluster's spare CPUs
# between runs (the division itself, reports and grants are unit-tested over real
# sockets in tests/unit/pool_server_test.cc): it creates its key (mode 0600),
# prints the address it listens on, answers --status, refuses a wrong key, stops
# on SIGTERM, and, killed with -9 and started again, serves again with an empty
# view (runs rebuild it by reporting).
source "$(dirname "$0")/lib.sh"

start_pool() {  # start_pool: starts a pool in the background; sets POOL_PID and ADDR
  "$GM" pool --listen 127.0.0.1:0 --cpus 16 --key-file "$T/pool.key" >"$T/pool.out" 2>"$T/pool.err" &
  POOL_PID=$!
  ADDR=""
  for _ in $(seq 1 100); do
    ADDR=$(head -n 1 "$T/pool.out" 2>/dev/null)
    [[ -n $ADDR ]] && break
    sleep 0.1
  done
  [[ -n $ADDR ]] || { cat "$T/pool.err" >&2; fail "the pool printed no address"; }
}
trap 'kill -9 $POOL_PID 2>/dev/null; rm -rf "$T"' EXIT

start_pool
ok "goldminer pool listens on $ADDR"
[[ $(stat -c %a "$T/pool.key") == 600 ]] || fail "the pool key is mode $(stat -c %a "$T/pool.key")"
expect_in "$T/pool.err" "created the pool key $T/pool.key (mode 0600)" "it created its key and said so"
expect_rc 0 "pool --status" -- "$GM" pool --status "$ADDR" --key-file "$T/pool.key"
expect_in "$T/out" "pool: 16 CPUs, 0 granted to 0 run(s)" "the status gives the budget and the division"
expect_rc 0 "pool --status --json" -- "$GM" pool --status "$ADDR" --key-file "$T/pool.key" --json
$PY -c 'import json,sys; s=json.load(open(sys.argv[1])); assert s == {"cpus": 16, "runs": [], "history": []}, s' "$T/out" ||
  fail "--json is not POOL_STATE: $(cat "$T/out")"
ok "--json prints POOL_STATE"
(umask 077; printf '%064d\n' 7 >"$T/other.key")
expect_rc 1 "a wrong key is refused" -- "$GM" pool --status "$ADDR" --key-file "$T/other.key"
expect_in "$T/err" "authentication failed" "the refusal says why"
expect_rc 1 "--status without a key file that exists is an error" -- \
  "$GM" pool --status "$ADDR" --key-file "$T/missing.key"
expect_rc 1 "serving without --cpus is an error" -- "$GM" pool --key-file "$T/pool.key"
expect_in "$T/err" "pool needs --cpus N" "the error names the flag"

kill -9 "$POOL_PID"; wait "$POOL_PID" 2>/dev/null
start_pool
expect_rc 0 "a pool killed with -9 and started again answers" -- \
  "$GM" pool --status "$ADDR" --key-file "$T/pool.key"
expect_in "$T/out" "0 run(s)" "with an empty view (the key file kept)"
kill -TERM "$POOL_PID"
wait "$POOL_PID"
rc=$?
[[ $rc == 0 ]] || fail "the pool exited $rc on SIGTERM"
expect_in "$T/pool.err" "pool: stopping on signal 15" "SIGTERM stops it cleanly"
expect_rc 0 "pool --help" -- "$GM" pool --help
expect_in "$T/out" "--report-timeout" "--help lists every flag"
done_suite
