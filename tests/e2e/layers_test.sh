#!/usr/bin/env bash
# The house's rules hold (../shared/ARCHITECTURE.md, "Modules"): no #include runs
# from a room to one it may not use (a lower floor up, or sideways), the rooms
# inside core/ and worker/ keep their own order, and the Python package has no
# import circle (imports inside functions count too), and no source outside tests/
# is over 700 lines, no Python function outside tests/ and bench/ over 80 (as
# clang-tidy checks C++ functions: scripts/clang_check.sh). Each breach is named with the file.
source "$(dirname "$0")/lib.sh"

# 1. The C++ rooms. A folder, or a room inside one, and the rooms it may include.
$PY - "$SRC" >"$T/cpp.out" 2>&1 <<'PY' || { cat "$T/cpp.out" >&2; fail "an include breaks the layers"; }
import re, subprocess, sys
src = sys.argv[1]
may_use = {
    "cmd": None,  # wires everything
    "profiler": {"core", "worker", "launcher", "dataplane"},
    "planner": {"core"},
    "simulator": {"core", "planner"},
    "launcher": {"core", "dataplane", "planner", "worker"},
    "worker": {"core", "dataplane", "goldminer", "include"},  # the C ABIs (include/goldminer)
    "dataplane": {"core"},
    "client": {"core", "dataplane", "goldminer", "include"},
    "reports": {"core"},
    "core": set(),
}
# Rooms inside a folder: (room, the same folder's rooms it may include). The
# OS edges use only Status; the vocabulary may use the OS edges; runs.db both;
# the image ops only the op interface of the rest of worker/.
inner = {
    "core/os": {"core/os", "core/status.h", "core/thread_annotations.h"},
    "core/store": {"core/store", "core/os", "core"},
    "core": {"core", "core/os"},
    "worker/image": {"worker/image", "worker/op.h"},
}
def room_of(path):
    parts = path.split("/")
    if len(parts) > 2 and "/".join(parts[:2]) in inner:
        return "/".join(parts[:2])
    return parts[0]
def allowed(room, target):
    for rule in inner.get(room, ()):
        if target == rule or target.startswith(rule + "/") and "/" not in target[len(rule) + 1:]:
            return True
    return False
files = subprocess.run(["git", "-C", src, "ls-files", "*.h", "*.cc"], capture_output=True,
                       text=True, check=True).stdout.split()
problems, edges = [], 0
for f in files:
    top = f.split("/")[0]
    if top not in may_use:
        continue  # tests, bench: they use anything
    for target in re.findall(r'^#include "([^"]+)"', open(f"{src}/{f}").read(), re.M):
        edges += 1
        other = target.split("/")[0]
        if other != top:
            if may_use[top] is not None and other not in may_use[top]:
                problems.append(f"{f} includes {target}: {top}/ may not use {other}/")
            continue
        room = room_of(f)
        if room in inner and not allowed(room, target):
            problems.append(f"{f} includes {target}: {room}/ may not use it")
if problems:
    print("\n".join(problems))
    sys.exit(1)
print(f"{len(files)} files, {edges} includes")
PY
ok "no include breaks the C++ layers: $(cat "$T/cpp.out")"

# 2. The Python package: its import graph, every import, has no circle.
$PY - "$SRC/python" >"$T/py.out" 2>&1 <<'PY' || { cat "$T/py.out" >&2; fail "an import circle"; }
import ast, os, sys
root = sys.argv[1]
modules = {}
for dirpath, _, names in os.walk(os.path.join(root, "goldminer")):
    for n in names:
        if n.endswith(".py"):
            path = os.path.join(dirpath, n)
            mod = os.path.relpath(path, root)[:-3].replace(os.sep, ".")
            modules[mod.removesuffix(".__init__")] = path
graph = {}
for mod, path in modules.items():
    deps = set()
    package = mod if path.endswith("__init__.py") else mod.rpartition(".")[0]
    for node in ast.walk(ast.parse(open(path).read(), path)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            names = [base] + [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        deps |= {n for n in names if n in modules and n != mod}
    graph[mod] = deps
# A module imports its package's __init__ first: an edge to the parent counts.
state, circles = {}, []
def visit(m, stack):
    state[m] = 1
    for d in sorted(graph[m]):
        if state.get(d) == 1:
            circles.append(" -> ".join(stack[stack.index(d):] + [d]))
        elif d not in state:
            visit(d, stack + [d])
    state[m] = 2
for m in sorted(graph):
    if m not in state:
        visit(m, [m])
if circles:
    print("import circles:\n" + "\n".join(circles))
    sys.exit(1)
print(f"{len(graph)} modules, {sum(map(len, graph.values()))} imports")
PY
ok "the Python package has no import circle: $(cat "$T/py.out")"

# 3. Sizes: files outside tests/ (generated tables aside), Python functions.
$PY - "$SRC" >"$T/size.out" 2>&1 <<'PY' || { cat "$T/size.out" >&2; fail "a room grew too big"; }
import ast, subprocess, sys
src = sys.argv[1]
files = subprocess.run(["git", "-C", src, "ls-files", "*.h", "*.cc", "*.c", "*.py", "*.sh"],
                       capture_output=True, text=True, check=True).stdout.split()
problems, longest = [], 0
for f in files:
    if f.startswith(("tests/", "data/")):
        continue
    text = open(f"{src}/{f}").read()
    lines = text.count("\n")
    longest = max(longest, lines)
    if lines > 700:
        problems.append(f"{f}: {lines} lines (at most 700 outside tests/)")
    if f.endswith(".py") and not f.startswith("bench/"):  # as clang-tidy: not bench/
        for node in ast.walk(ast.parse(text, f)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > 80:
                    problems.append(f"{f}:{node.lineno}: {node.name} is {length} lines (at most 80)")
if problems:
    print("\n".join(problems))
    sys.exit(1)
print(f"{len(files)} files, the longest {longest} lines")
PY
ok "no source outside tests/ over 700 lines, no package function over 80: $(cat "$T/size.out")"
echo "$checks passed, 0 failed"
