#!/usr/bin/env bash
# The one clang build of CI: every source of the project (tests and benchmarks
# included) through clang with the build's own flags, plus -Wthread-safety (the
# GUARDED_BY / REQUIRES annotations of core/thread_annotations.h) and -Werror, so
# the lock discipline the annotations state is checked by the compiler. Sources
# outside tests/ and bench/ go through clang-tidy (the narrow .clang-tidy: no
# function over 80 lines), the others through clang++ -fsyntax-only. Needs a
# configured build (compile_commands.json). Usage:
#   scripts/clang_check.sh [BUILD_DIR [REGEX]]   (REGEX: only sources whose path matches)
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:-build}
filter=${2:-}
db=$build_dir/compile_commands.json
[[ -f $db ]] || { echo "clang_check: $db is missing: run scripts/build.sh first" >&2; exit 1; }
command -v clang++ >/dev/null || { echo "clang_check: clang++ is missing: run scripts/install-deps.sh" >&2; exit 1; }
list=$(mktemp)
trap 'rm -f "$list"' EXIT
# One line per source: the compiler's flags without the compiler, -o and -c.
/usr/bin/python3 - "$db" "$filter" >"$list" <<'PY'
import json, re, shlex, sys
for c in json.load(open(sys.argv[1])):
    if not c["file"].endswith(".cc"):  # C sources (a test's trainer) are not C++
        continue
    if sys.argv[2] and not re.search(sys.argv[2], c["file"]):
        continue
    args = shlex.split(c["command"])[1:]
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a in ("-o", "-c", "-MF", "-MT"):
            skip = True
            continue
        if a in ("-MD",) or a == c["file"]:
            continue
        out.append(a)
    print(shlex.quote(c["directory"]) + " " + shlex.quote(c["file"]) + " " + " ".join(map(shlex.quote, out)))
PY
n=$(wc -l <"$list")
echo "clang_check: $n sources, clang -Wthread-safety -Werror (clang-tidy outside tests/ and bench/)"
# shellcheck disable=SC2016
xargs -P "$(nproc)" -L 1 sh -c 'dir=$1; file=$2; shift 2; cd "$dir" || exit 1
  set -- "$@" -Wthread-safety -Wthread-safety-beta -Werror -Wno-unknown-warning-option
  case $file in
    */tests/*|*/bench/*) clang++ -fsyntax-only "$@" "$file" ;;
    *) out=$(clang-tidy --quiet "$file" -- "$@" 2>&1); rc=$?
       printf "%s\n" "$out" | grep -v "warnings* generated" >&2; [ "$rc" -eq 0 ] ;;
  esac || { echo "clang_check: FAILED: $file" >&2; exit 1; }' sh <"$list" ||
  { echo "clang_check: some sources failed (above)" >&2; exit 1; }
echo "clang_check: all $n sources passed"
