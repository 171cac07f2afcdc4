#!/usr/bin/env bash
# One file of tests/python under one interpreter: run_suite.sh PYTHON TEST_NAME.
# An interpreter that is missing fails loudly, naming how to install it.
set -euo pipefail
python=$1 name=$2
if [[ ! -x $python ]]; then
  echo "run_suite: no Python at $python: install the torch 2.x of the suite with" \
    "scripts/install-torch2.sh (scripts/setup.sh test does)" >&2
  exit 1
fi
"$python" -c 'import sys, torch; print(f"run_suite: {sys.executable}: Python {sys.version.split()[0]}, torch {torch.__version__}")'
exec "$python" -m unittest discover -s tests/python -p "$name.py" -v
