#!/usr/bin/env python3
"""A newcomer's first run, measured: `make run RUN_ARGS=--once` (and, with
--test, `make test` after it) in a fresh clone with empty Go caches.

README.md's and docs/getting-started.md's first-run figures are measured
this way (with this script since commit 664ffb1):

    python3 hack/bench/first_run.py --test            # HEAD of this checkout
    python3 hack/bench/first_run.py --rev 5524b49     # another commit

It clones the checkout's commit REV into WORKDIR/src (the clone sees
../shared beside it, as this checkout does), points GOCACHE and GOMODCACHE
at empty folders in WORKDIR, and runs each make target there with its
output, prefixed with seconds since the start, in WORKDIR/<target>.log.
Then it prints per target: wall time; CPU seconds (user and system, from
getrusage of the children, so every compiler and server counts); the page
faults; the largest resident set of any one process (when the target set
a new one: getrusage keeps one figure for all children); how busy the
machine's cores were meanwhile (from /proc/stat, so anything else running
shows up there: measure on an otherwise idle machine); and each `>> built`
line.

The machine's speed drifts (the same build took 13.5 % more CPU at one
hour than at another on the project's 2-core class): compare two commits
side by side, one run of each started at the same moment, or alternate
them, never against a figure from another hour. WORKDIR (default: a new
folder under $TMPDIR) is removed at the end unless --keep or a target
failed; it needs about 9 GB.
"""
import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time


def cpu_times():
    """Busy and total jiffies of all cores, from /proc/stat's first line."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle and iowait
    return sum(fields) - idle, sum(fields)


class Run:
    """One make target in the clone, timed, its output logged."""

    def __init__(self, target, args, cwd, env, log_path):
        self.target, self.args, self.cwd, self.env, self.log_path = target, args, cwd, env, log_path
        self.built = []

    def run(self):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        busy0, total0 = cpu_times()
        start = time.monotonic()
        # Line-buffered: the log can be followed while the build runs.
        with open(self.log_path, "w", buffering=1) as log:
            proc = subprocess.Popen(["make", *self.args], cwd=self.cwd, env=self.env,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                    errors="replace")
            for line in proc.stdout:
                at = time.monotonic() - start
                log.write(f"{at:7.1f} {line}")
                if line.startswith(">> built"):
                    self.built.append(f"{at:5.0f} s {line.strip()}")
                    print(f"   {self.target}: {line.strip()} (at {at:.0f} s)", flush=True)
            self.rc = proc.wait()
        self.wall = time.monotonic() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        busy1, total1 = cpu_times()
        self.user = after.ru_utime - before.ru_utime
        self.sys = after.ru_stime - before.ru_stime
        self.faults = after.ru_minflt - before.ru_minflt
        # ru_maxrss of the children is the largest of any one of them so far
        # (KiB): a target's own figure only when it set a new one.
        self.maxrss_mb = after.ru_maxrss / 1024 if after.ru_maxrss > before.ru_maxrss else None
        self.busy = (busy1 - busy0) / max(1, total1 - total0)
        return self

    def report(self):
        m, s = divmod(round(self.wall), 60)
        status = "ok" if self.rc == 0 else f"FAILED (exit {self.rc}; see {self.log_path})"
        parts = [
            f"{m} min {s} s",
            f"{self.user + self.sys:,.0f} CPU-s ({self.user:,.0f} user + {self.sys:,.0f} system)",
            f"{self.faults / 1e6:.1f} M page faults",
        ]
        if self.maxrss_mb:
            parts.append(f"largest process {self.maxrss_mb:,.0f} MB")
        parts.append(f"cores {100 * self.busy:.0f} % busy")
        return "\n".join([f"{self.target}: {', '.join(parts)}: {status}", *[f"  {b}" for b in self.built]])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rev", default="HEAD", help="commit of this checkout to clone (default HEAD)")
    ap.add_argument("--test", action="store_true", help="also run `make test` after `make run`")
    ap.add_argument("--workdir", help="where to clone and keep the caches (default: a new temporary folder)")
    ap.add_argument("--keep", action="store_true", help="keep WORKDIR (the clone, its bin/ and the Go caches)")
    args = ap.parse_args()

    repo = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True,
                          check=True).stdout.strip()
    rev = subprocess.run(["git", "-C", repo, "rev-parse", "--short", args.rev], capture_output=True,
                         text=True, check=True).stdout.strip()
    work = args.workdir or tempfile.mkdtemp(prefix=f"first-run-{rev}-")
    os.makedirs(work, exist_ok=True)
    src = os.path.join(work, "src")
    if os.path.exists(src):
        sys.exit(f"first_run: {src} exists; give an empty --workdir")
    subprocess.run(["git", "clone", "-q", repo, src], check=True)
    subprocess.run(["git", "-C", src, "checkout", "-q", rev], check=True)
    shared = os.path.join(os.path.dirname(repo), "shared")
    if os.path.isdir(shared):
        os.symlink(shared, os.path.join(work, "shared"))

    env = dict(os.environ, GOCACHE=os.path.join(work, "gocache"), GOMODCACHE=os.path.join(work, "gomod"))
    # What this shell set for its own Go work must not change what a newcomer's make does.
    for k in ("GOFLAGS", "GOWORK", "CGO_ENABLED", "GOTOOLCHAIN", "MINIONVAULT_TOOLS_DIR"):
        env.pop(k, None)

    print(f">> first run of {rev} in {src}, empty Go caches, started {time.strftime('%F %T %Z')}", flush=True)
    runs = [Run("make run", ["run", "RUN_ARGS=--once"], src, env, os.path.join(work, "run.log"))]
    if args.test:
        runs.append(Run("make test", ["test"], src, env, os.path.join(work, "test.log")))
    done = []
    for r in runs:
        done.append(r.run())
        if r.rc != 0:
            break
    print()
    for r in done:
        print(r.report())
    if len(done) == 2:
        m, s = divmod(round(sum(r.wall for r in done)), 60)
        print(f"together: {m} min {s} s")
    failed = any(r.rc != 0 for r in done)
    if args.keep or failed:
        # A failed target's report points at its log: keep it to be read.
        print(f"kept {work}")
    else:
        # The module cache is read-only on purpose; the clean-up undoes that.
        subprocess.run(["chmod", "-R", "u+w", work], check=False)
        shutil.rmtree(work)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
