#!/usr/bin/env bash
# bench/scale_bench.cc at a small size: a real coordinator in its own process under
# light workers and ranks over real sockets and keys, every split handed out,
# made and acknowledged (it exits non-zero otherwise), one figure row per count;
# then the pool's division for a few runs. The figures are this machine's and
# are not checked; that the bench completes and reports each row is.
source "$(dirname "$0")/lib.sh"
bench=$BUILD/bench/scale_bench
[[ -x $bench ]] || fail "$bench is missing: build the bench target"
expect_rc 0 "scale_bench completes at 4 and 16 workers, 1 and 2 ranks, 1 to 64 runs" -- \
  timeout 300 "$bench" --workers 4,16 --ranks 1,2 --min-splits 40 --rate 60000 --runs 1,16,64
rows=$(grep -cE '^ +(4|16) +(1|2) +[0-9]+ ' "$T/out")
[[ $rows == 4 ]] || { cat "$T/out" >&2; fail "expected 4 coordinator rows, got $rows"; }
ok "a figure row for each of the 4 counts"
grep -qE '^ +64 +[0-9.]+ +[0-9.-]+ +[0-9]+$' "$T/out" || { cat "$T/out" >&2; fail "no pool row for 64 runs"; }
ok "the pool's division timed for 64 runs"
[[ ! -s $T/err ]] || { cat "$T/err" >&2; fail "the bench printed on stderr"; }
ok "nothing on stderr: no worker or rank was refused or dropped"
echo "$checks passed, 0 failed"
