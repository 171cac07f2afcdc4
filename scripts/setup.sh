#!/usr/bin/env bash
# The two set-up commands of the README:
#   scripts/setup.sh demo   install what is needed, build, run the demo
#   scripts/setup.sh test   install what is needed, build, run the whole test suite
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  demo) bash scripts/install-deps.sh && bash scripts/build.sh && exec bash scripts/demo.sh ;;
  test) bash scripts/install-deps.sh && bash scripts/install-torch2.sh && bash scripts/build.sh &&
    exec bash scripts/test.sh ;;
  *) echo "usage: $0 demo|test" >&2; exit 2 ;;
esac
