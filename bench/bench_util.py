"""Helpers shared by the benchmark scripts."""
import subprocess
import sys


def run_checked(name, cmd, **kw):
    """Runs cmd, capturing its output; on failure prints the tail of its stderr and
    exits naming the benchmark and the command."""
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    if r.returncode != 0:
        sys.stderr.write(r.stderr[-3000:])
        raise SystemExit("%s: failed (%d): %s" % (name, r.returncode, " ".join(cmd)))
    return r
