# Shared helpers for end-to-end suites: each suite is `bash suite.sh GOLDMINER BUILD_DIR`.
# A suite owns a temporary directory (removed on exit) and counts its checks; it
# exits non-zero on the first failed check, printing what was expected.
set -uo pipefail
GM=${1:?usage: suite.sh GOLDMINER BUILD_DIR}
BUILD=${2:?usage: suite.sh GOLDMINER BUILD_DIR}
SRC=${GOLDMINER_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
PY=/usr/bin/python3
T=$(mktemp -d "${TMPDIR:-/tmp}/goldminer-e2e-XXXXXX")
trap 'rm -rf "$T"' EXIT
# What the binary under test leaves in $TMPDIR when a test kills it with SIGKILL
# (a run's private directory) goes with the suite's own directory.
export TMPDIR=$T
checks=0

fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { checks=$((checks + 1)); echo "ok $checks - $*"; }

# expect_rc RC DESCRIPTION -- CMD...: runs CMD, stores stdout/stderr in $T/out, $T/err.
expect_rc() {
  local want=$1 what=$2; shift 3
  "$@" >"$T/out" 2>"$T/err"
  local rc=$?
  [[ $rc == "$want" ]] || { cat "$T/err" >&2; fail "$what: exit $rc, expected $want: $*"; }
  ok "$what"
}

# expect_in FILE TEXT DESCRIPTION
expect_in() {
  grep -qF -- "$2" "$1" || { echo "--- $1:" >&2; cat "$1" >&2; fail "$3: '$2' not in $1"; }
  ok "$3"
}

done_suite() { echo "$checks passed, 0 failed"; }
