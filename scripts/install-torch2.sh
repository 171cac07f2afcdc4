#!/usr/bin/env bash
# Installs the torch 2.x that the test suite also runs on, into .venv-torch2/ (a
# virtual environment of Debian's Python 3.11, beside the system's python3-torch
# 1.13): the pinned versions of python/torch2/, from PyPI. About 5.5 GiB; a minute
# or two where PyPI is fast. Does nothing when the environment already holds them.
# Usage: scripts/install-torch2.sh [DIR]   (default: .venv-torch2 in the checkout)
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${1:-$PWD/.venv-torch2}
req=python/torch2/requirements.txt
con=python/torch2/constraints.txt
stamp=$venv/.goldminer-pins
want=$(cat "$req" "$con" | sha256sum | cut -d' ' -f1)
if [[ -x $venv/bin/python && -f $stamp && $(cat "$stamp") == "$want" ]]; then
  echo "install-torch2: $venv holds the pinned torch 2.x already"
  exit 0
fi
echo "install-torch2: installing the pinned torch 2.x into $venv (PyPI)"
[[ -x $venv/bin/python ]] || /usr/bin/python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --progress-bar off --disable-pip-version-check \
  -r "$req" -c "$con"
"$venv/bin/python" -c "import torch, torchvision, lightning; print('install-torch2: torch', torch.__version__, 'torchvision', torchvision.__version__, 'lightning', lightning.__version__)"
echo "$want" >"$stamp"
