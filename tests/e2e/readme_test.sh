#!/usr/bin/env bash
# The README is a front door that stays true: its layout table names exactly the
# project's folders, every goldminer command it shows names a verb and flags that
# verb has (its --help), every man page, script and benchmark it points to exists,
# and it stays short enough to read in five minutes.
source "$(dirname "$0")/lib.sh"
readme=$SRC/README.md
$PY - "$readme" "$SRC" "$GM" >"$T/check.out" 2>&1 <<'PY' || { cat "$T/check.out" >&2; fail "the README"; }
import os, re, subprocess, sys
readme, src, gm = sys.argv[1:4]
text = open(readme).read()
problems = []

# 1. The layout table against the folders git tracks (dot folders aside).
table = re.search(r"## Layout\n\n\| folder \| owns \|\n\| --- \| --- \|\n((?:\|.*\n)+)", text)
assert table, "no layout table"
listed = {re.match(r"\| `([^`/]+)/` \|", row).group(1) for row in table.group(1).splitlines()}
tracked = subprocess.run(["git", "-C", src, "ls-files"], capture_output=True, text=True,
                         check=True).stdout.split()
folders = {p.split("/")[0] for p in tracked if "/" in p and not p.startswith(".")}
for f in sorted(folders - listed):
    problems.append(f"folder {f}/ is not in the layout table")
for f in sorted(listed - folders):
    problems.append(f"the layout table names {f}/, which is not in the tree")

# 2. Every goldminer command: in code blocks (indented or fenced) and in `...` spans.
verbs = {"profile", "plan", "run", "report", "worker", "pool", "simulate"}
helps = {}
def flags_of(verb):
    if verb not in helps:
        out = subprocess.run([gm, verb, "--help"], capture_output=True, text=True)
        helps[verb] = set(re.findall(r"(--[a-z][a-z0-9-]*)", out.stdout))
    return helps[verb]
commands = re.findall(r"^    (goldminer [^\n#]*)", text, re.M)
commands += re.findall(r"`(goldminer [^`]*)`", text)
commands += ["goldminer " + c for c in re.findall(r"`((?:plan|run|profile|report) --[^`]*)`", text)]
checked = 0
for c in commands:
    words = c.split()
    verb = words[1]
    if verb not in verbs:
        problems.append(f"`{c}`: {verb} is not a verb")
        continue
    for w in words[2:]:
        if w == "--":
            break  # the trainer's command follows
        if w.startswith("--") and w.split("=")[0] not in flags_of(verb):
            problems.append(f"`{c}`: goldminer {verb} has no {w}")
    checked += 1

# 3. Pointers: man pages, scripts, benchmarks, examples.
man = set(os.listdir(os.path.join(src, "man")))
for page in re.findall(r"man (goldminer(?:-[a-z.]+)?)", text):
    if not any(m.startswith(page + ".") for m in man):
        problems.append(f"man {page}: no such page in man/")
for path in re.findall(r"`((?:scripts|examples|bench|include|python|data)/[^`\s]*)`", text):
    if not os.path.exists(os.path.join(src, path)):
        problems.append(f"{path}: no such file")
figures = text.split("## Figures", 1)[-1].split("\n## ", 1)[0]
for name in re.findall(r"\(`([a-z_]+(?:\.py)?)`\)", figures):
    if not (os.path.exists(os.path.join(src, "bench", name)) or
            os.path.exists(os.path.join(src, "bench", name + ".cc"))):
        problems.append(f"benchmark {name}: not in bench/")

# 4. Short: a front door, its depth in the manuals.
if len(text.encode()) > 6500:
    problems.append(f"README.md is {len(text.encode())} bytes; keep it under 6,500")
if problems:
    print("\n".join(problems))
    sys.exit(1)
print(f"{len(listed)} folders, {checked} commands, {len(text.encode())} bytes")
PY
ok "the README's layout, commands, pointers and length hold: $(cat "$T/check.out")"
echo "$checks passed, 0 failed"
