#!/usr/bin/env bash
# Installs everything goldminer needs to build, test, benchmark and run its demo,
# from Debian's packages only. Run as root on Debian 12. Safe to re-run.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

packages=(
  # build
  build-essential cmake ninja-build ccache pkg-config git
  # libraries
  libcli11-dev nlohmann-json3-dev libsqlite3-dev sqlite3 libcurl4-openssl-dev
  libturbojpeg0-dev libjpeg62-turbo-dev libssl-dev
  # tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev clang libclang-rt-14-dev clang-format clang-tidy
  python3 python3-numpy python3-pil python3-torch python3-torchvision python3-cloudpickle
  python3-lmdb iperf3
  # a real browser for the report's tests
  chromium
  # a real Slurm cluster for the plan and run tests (iproute2: nodes in network namespaces)
  slurmctld slurmd slurm-client munge iproute2
  # the installed modulefile is loaded with Lmod in the install test
  lmod
  # real photos for the demo corpus and the benchmarks
  lomiri-wallpapers-16.04 palapeli-data
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages already installed"
  exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "install-deps: missing packages: ${missing[*]}" >&2
  echo "install-deps: run as root (or: sudo $0)" >&2
  exit 1
fi
echo "install-deps: installing ${#missing[@]} packages: ${missing[*]}"
apt-get -o DPkg::Lock::Timeout=600 update -qq
apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}"
