#!/usr/bin/env bash
# CI's format check: every C++ source and header the project tracks is as
# clang-format (Debian's, with .clang-format: Google style, 100 columns) writes it.
# Prints the files that are not, and how to fix them. Usage: scripts/format_check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || { echo "format_check: clang-format is missing: run scripts/install-deps.sh" >&2; exit 1; }
bad=()
while IFS= read -r f; do
  clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done < <(git ls-files '*.cc' '*.h')
if ((${#bad[@]})); then
  printf 'format_check: not formatted: %s\n' "${bad[@]}" >&2
  echo "format_check: run: clang-format -i ${bad[*]}" >&2
  exit 1
fi
echo "format_check: $(git ls-files '*.cc' '*.h' | wc -l) files formatted"
