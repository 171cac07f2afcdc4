# Sourced by the scripts that run on a GPU machine (gpu_check.sh, gpu_feed.sh):
# where the repository and the build are, packing a build to carry there, and
# where a run's output goes.

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$(cd "${BUILD:-$REPO/build}" 2>/dev/null && pwd || echo "${BUILD:-$REPO/build}")

# pack_build DIR: goldminer and the client library (real files, no links),
# stripped, in BUILD's layout under DIR. Exits on failure.
pack_build() {
  local dir=$1 name
  mkdir -p "$dir/cmd" "$dir/client" || exit 1
  strip -o "$dir/cmd/goldminer" "$BUILD/cmd/goldminer" || exit 1
  for name in libgoldminer_client.so libgoldminer_client.so.1; do
    strip --strip-unneeded -o "$dir/client/$name" "$(readlink -f "$BUILD/client/$name")" || exit 1
  done
}

# start_output NAME: OUT (made absolute; a new temporary directory when unset)
# gets NAME.log, a copy of everything the script prints from here on; WORK is a
# scratch directory removed at exit.
start_output() {
  local name=$1
  OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/$name-XXXXXX")}
  mkdir -p "$OUT"
  OUT=$(cd "$OUT" && pwd)
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/$name-work-XXXXXX")
  trap 'rm -rf "$WORK"' EXIT
  exec > >(tee -a "$OUT/$name.log") 2>&1
}
