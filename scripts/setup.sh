#!/usr/bin/env bash
# The two set-up commands of the README:
#   scripts/setup.sh demo   install what is needed, build, run the demo
#   scripts/setup.sh test   install what is needed, build, run the whole test suite
# The test command prints how long each phase took (install, build, then
# scripts/test.sh's own phases), so a slow CI run says where its time went.
set -euo pipefail
cd "$(dirname "$0")/.."
timings=()
phase() {  # phase NAME COMMAND...: runs it, and notes its seconds
  local name=$1 start=$SECONDS
  shift
  "$@"
  timings+=("$name $((SECONDS - start)) s")
  echo "== $name: $((SECONDS - start)) s"
}
case "${1:-}" in
  demo) bash scripts/install-deps.sh && bash scripts/build.sh && exec bash scripts/demo.sh ;;
  test)
    phase "install" bash scripts/install-deps.sh
    # torch 2.x from PyPI (download and unpacking) while the build compiles.
    torch_log=$(mktemp)
    bash scripts/install-torch2.sh >"$torch_log" 2>&1 &
    torch_pid=$!
    trap 'kill "$torch_pid" 2>/dev/null || true; rm -f "$torch_log"' EXIT
    phase "build (torch 2.x installed beside it)" bash scripts/build.sh
    waited=$SECONDS
    torch_status=0
    wait "$torch_pid" || torch_status=$?
    cat "$torch_log"
    [[ $torch_status -eq 0 ]] || { echo "setup.sh: installing torch 2.x failed (above)" >&2; exit 1; }
    timings+=("torch 2.x past the build $((SECONDS - waited)) s")
    phase "tests" bash scripts/test.sh
    summary=""
    for t in "${timings[@]}"; do summary+="${summary:+; }$t"; done
    echo "== setup.sh test: $summary; $SECONDS s in all"
    ;;
  *) echo "usage: $0 demo|test" >&2; exit 2 ;;
esac
