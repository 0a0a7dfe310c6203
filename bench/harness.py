#!/usr/bin/env python3
"""sunmao benchmark harness (Python 3 stdlib only). Started by bench/run.sh, which
compiles the workload programs and passes the configuration in the environment:

  BUILD, INSTANCES, BENCH_BIN (compiled workloads), QUICK, SMOKE, BENCH, ALLOCS,
  BASELINE, ROUNDS, TIMEOUT, RESULTS_DIR, SM_ROOT

Every allocator is measured in the same run, interleaved: for each round, for each
workload, every allocator runs once (the allocator order rotates between rounds).
Elapsed time and peak RSS come from wait4()'s rusage of the measured process.
"""
import csv
import datetime
import hashlib
import json
import math
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ENV = os.environ
ROOT = ENV.get("SM_ROOT") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = ENV.get("BUILD", "build")
BIN = ENV.get("BENCH_BIN") or os.path.join(BUILD, "bench")
SMTIME = os.path.abspath(os.path.join(BIN, "smtime"))
QUICK = ENV.get("QUICK", "0") not in ("", "0", "no", "false")
SMOKE = ENV.get("SMOKE", "0") not in ("", "0", "no", "false")
NCPU = os.cpu_count() or 1
CLEAN_ENV = {k: v for k, v in ENV.items() if k != "LD_PRELOAD" and not k.startswith("PYTHON")}
PCTS = ["p90", "p99", "p99.9", "p99.99", "p99.999", "p99.9999"]
PCT_VALUES = [90, 99, 99.9, 99.99, 99.999, 99.9999]


def die(msg):
    print("bench: error: " + msg, file=sys.stderr)
    sys.exit(2)


# ---------------------------------------------------------------- allocators
PEERS = [  # name, soname, Debian package
    ("jemalloc", "libjemalloc.so.2", "libjemalloc2"),
    ("tcmalloc", "libtcmalloc_minimal.so.4", "libtcmalloc-minimal4"),
    ("mimalloc", "libmimalloc.so.2", "libmimalloc2.0"),
    # oneTBB's scalable allocator: the proxy library replaces malloc & co. when preloaded; libtbbmalloc2
    # ships only the versioned name (the unversioned link is in libtbb-dev).
    ("tbbmalloc", "libtbbmalloc_proxy.so.2", "libtbbmalloc2"),
]

# Failures that are a bug of the peer as Debian 12 ships it, not of the harness or the workload:
# (workload, allocator, regex on the reason) -> the note printed under the failures and in the report.
KNOWN_FAILS = [
    ("rptest", "mimalloc", r"aligned_alloc\(.*misaligned",
     "Debian's mimalloc 2.0.9 (libmimalloc2.0) has a bug: aligned_alloc returns blocks that are not "
     "aligned as asked, and rptest checks every block's alignment."),
]


# Where libsunmao (instance `sunmao`) trails, the measured reason, for the report's "Against the best
# peer" section (issue 20: a workload that misses the target is named there with its reason). Each
# entry: (instance, "time" | "rss", workload) -> one line naming the measurement and where docs/ has
# it; keep them true when the code changes (a workload no longer behind prints nothing).
KNOWN_GAPS = {
    ("sunmao", "time", "alloc-test"):
        "hit paths of 30 + 52 instructions (malloc, free) against mimalloc's 16 + 26: the owner lookup, the "
        "interior-pointer test, the double-free tag and the encoded links; the program's own floating-point "
        "work shares the core with them (docs/default-allocator.md, tenth and eleventh sessions)",
    ("sunmao", "time", "larson"):
        "churn on the hit paths: 30 + 51 instructions a malloc and a free against mimalloc's 19 + 27 "
        "(callgrind, docs/default-allocator.md, nineteenth session)",
    ("sunmao", "time", "wcet"):
        "the consuming thread's swing through the slabs: 4.5 M objects cross slab_lk each way where the "
        "program forces 1.35 M; only a cache as large as tcmalloc's removes it (docs/default-allocator.md, "
        "thirteenth session)",
    ("sunmao", "time", "glibc-simple"):
        "each burst of 1000 objects crosses between the thread cache and the slabs both ways (slab_lk's "
        "free_batch 14% of the samples; docs/default-allocator.md, thirteenth and eighteenth sessions)",
    ("sunmao", "time", "purge-small"):
        "1 GiB of small blocks built and then torn down: every object crosses between the thread cache and the "
        "slabs both ways, 219 instructions an object's round trip against mimalloc's 75 (docs/default-allocator.md, "
        "eighteenth session); thread-owned slabs instead (libsunmao-sharded) were 1.21x slower here and 1.07x "
        "over the suite (twentieth session)",
    ("sunmao", "time", "pygrow"):
        "python's own work is the same; 5% more instructions than under tcmalloc, 35 M of the 81 M more in free's "
        "hit path (51 instructions against tcmalloc's 35, 2.2 M frees; callgrind, docs/default-allocator.md, "
        "nineteenth session)",
    ("sunmao", "rss", "strgrow"):
        "300 strings cross each class together: the class left and the class entered both hold partly used "
        "slabs; only a coalescing heap lowers it, at twice the time (docs/default-allocator.md, twelfth session)",
    ("sunmao", "rss", "mstress"):
        "medium blocks of which the program writes only the first and last bytes: reused free space has been "
        "written before, where a fresh block's middle pages were never touched (docs/default-allocator.md, "
        "nineteenth session)",
}
SMALL_PROGRAM_RSS = ("a small program: the library's own pages (about 0.3 MiB over glibc's floor) and a partly used "
                     "slab per class%s (docs/default-allocator.md, eleventh and nineteenth sessions)")
KNOWN_GAPS.update({("sunmao", "rss", w): SMALL_PROGRAM_RSS % extra
                   for w, extra in (("glibc-simple", ""), ("glibc-thread", " and CPU shard"), ("sh6bench", ""))})


def rounds_verdict(s, best):
    """How an instance's rounds (summary s) compare with the fastest peer's (summary best) on a workload
    where its median is behind: its fastest round at or under the peer's, the two ranges overlapping,
    or behind on every round."""
    span = "%.3f–%.3f s against %.3f–%.3f" % (s["tmin"], s["tmax"], best["tmin"], best["tmax"])
    if s["tmin"] <= best["tmin"]:
        return "its fastest round at or under the peer's (%s)" % span
    if s["tmin"] <= best["tmax"]:
        return "rounds overlap (%s)" % span
    return "behind on every round (%s)" % span


def known_fail_note(workload, alloc, reason):
    """The note for a FAIL that is a known bug of a peer (wcetstat+<alloc> as well), or None."""
    for w, a, pattern, note in KNOWN_FAILS:
        if workload == w and alloc.split("+")[-1] == a and re.search(pattern, reason or ""):
            return note
    return None


def find_soname(soname):
    try:
        out = subprocess.run(["/sbin/ldconfig", "-p"], capture_output=True, text=True).stdout
    except OSError:
        out = ""
    for line in out.splitlines():
        line = line.strip()
        if line.startswith(soname + " ") and "x86-64" in line or line.startswith(soname + " ") and "64" in line:
            return line.split("=>")[-1].strip()
    for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib"):
        p = os.path.join(d, soname)
        if os.path.exists(p):
            return p
    return None


def discover_allocators():
    """Returns (allocs, problems): allocs = [{name, preload, kind}], problems = {name: why}."""
    allocs = [{"name": "glibc", "preload": "", "kind": "baseline"}]
    problems = {}
    for name, soname, _pkg in PEERS:
        p = find_soname(soname)
        if p:
            allocs.append({"name": name, "preload": p, "kind": "peer"})
        else:
            problems[name] = "skip:%s not installed" % soname
    inst = ENV.get("INSTANCES")
    if inst is None or not inst.strip():
        idir = os.path.join(ROOT, "instances")
        inst = " ".join(sorted(f[:-2] for f in os.listdir(idir) if f.endswith(".c"))) if os.path.isdir(idir) else ""
        if not inst:  # no instance list at all: take whatever is built
            inst = " ".join(sorted(f[3:-3] for f in os.listdir(BUILD) if f.startswith("lib") and f.endswith(".so")
                                   and not f.startswith("libsm_"))) if os.path.isdir(BUILD) else ""
    for name in inst.split():
        lib = os.path.abspath(os.path.join(BUILD, "lib%s.so" % name))
        if os.path.exists(lib):
            allocs.append({"name": name, "preload": lib, "kind": "sunmao"})
        else:
            problems[name] = "fail:%s not built" % os.path.join(BUILD, "lib%s.so" % name)
    return allocs, problems


WCETSTAT_LIB = os.path.abspath(os.path.join(BUILD, "bench", "libwcetstat.so"))


def wcetstat_variants(want, allocs, problems):
    """The allocators named `wcetstat+<alloc>` in ALLOCS: <alloc> with bench/lib/wcetstat.c's
    libwcetstat.so preloaded in front of it (LD_PRELOAD=libwcetstat.so:<alloc's library>), which times
    one malloc and one free in 8 inside the measured program and writes its percentiles to
    SUNMAO_WCET_OUT; the harness reads them into the run's metrics as ws_<name>."""
    known = {a["name"]: a for a in allocs}
    out = []
    for n in want:
        if not n.startswith("wcetstat+"):
            continue
        base = n[len("wcetstat+"):]
        if base in problems:
            problems[n] = problems[base]
        elif base not in known:
            die("ALLOCS: unknown allocator '%s' in '%s' (known: %s)" % (base, n, " ".join(sorted(known))))
        elif not os.path.exists(WCETSTAT_LIB):
            problems[n] = "fail:%s not built (make)" % os.path.relpath(WCETSTAT_LIB)
        else:
            pre = known[base]["preload"]
            out.append({"name": n, "preload": WCETSTAT_LIB + (":" + pre if pre else ""), "kind": "wcetstat",
                        "wcetstat": True})
    return out


# ---------------------------------------------------------------- workloads
def W(name, group, full, quick, kind="prog", desc="", geo=("time", "rss"), runs=None):
    """geo: the fields (time, rss) whose ratio counts in the geometric means. runs: (full, quick), the
    least number of runs per allocator over the whole benchmark (spread over the rounds; default one
    per round)."""
    w = {"name": name, "group": group, "full": full, "quick": quick, "kind": kind, "desc": desc, "geo": list(geo)}
    if runs:
        w["runs"] = list(runs)
    return w


def runs_in_round(w, rounds, r):
    """How many times workload w runs per allocator in round r (0-based): its runs, at least one per
    round, spread over the rounds (the earlier rounds take the remainder)."""
    total = max(rounds, (w.get("runs") or [1, 1])[1 if (QUICK or SMOKE) else 0])
    return total // rounds + (1 if r < total % rounds else 0)


def workloads():
    T = str(NCPU)
    ws = [
        W("micro-st", "micro", ["micro", "1", "50000000", "64"], ["micro", "1", "10000000", "64"],
          desc="malloc/free pairs, 1 thread (metric: ns per pair)"),
        W("micro-mt", "micro", ["micro", T, "30000000", "64"], ["micro", T, "6000000", "64"],
          desc="malloc/free pairs, all threads"),
        W("larson", "stress", ["larson", T, "40", "1000", "250000", "8", "1024"],
          ["larson", T, "10", "1000", "200000", "8", "1024"], desc="server churn, regions handed to new threads"),
        W("xchurn", "stress", ["xchurn", T, "3000000", "2000", "4096"], ["xchurn", T, "300000", "2000", "4096"],
          desc="churn of 16..4096 B objects, every one freed by another (live) thread"),
        W("xmalloc", "stress", ["xmalloc", str(max(2, NCPU)), "75000", "64", "256"],
          ["xmalloc", str(max(2, NCPU)), "15000", "64", "256"], desc="producer/consumer, remote frees"),
        W("cache-thrash", "stress", ["cache", "thrash", T, "1500", "100000", "8"],
          ["cache", "thrash", T, "400", "100000", "8"], desc="active false sharing"),
        W("cache-scratch", "stress", ["cache", "scratch", T, "1500", "100000", "8"],
          ["cache", "scratch", T, "400", "100000", "8"], desc="passive false sharing"),
        W("cache-scratch1", "stress", ["scratch1", "100", "60", "100000", "8"], ["scratch1", "30", "30", "100000", "8"],
          desc="passive false sharing, one worker: main's object handed over while main writes its neighbours"),
        W("sh6bench", "stress", ["shbench", "6", T, "1000", "2000", "1", "1000"],
          ["shbench", "6", T, "200", "2000", "1", "1000"], desc="LIFO+FIFO mixes"),
        W("sh8bench", "stress", ["shbench", "8", T, "750", "2000", "1", "1000"],
          ["shbench", "8", T, "150", "2000", "1", "1000"], desc="LIFO+FIFO with cross-thread frees"),
        W("alloc-test", "stress", ["alloctest", T, "8000000", "4096", "65536"],
          ["alloctest", T, "2500000", "4096", "65536"], desc="Pareto sizes, random replacement"),
        W("pareto-st", "stress", ["pareto", "1", "20000000", "4194304", "65536"],
          ["pareto", "1", "3000000", "1048576", "65536"], desc="Pareto sizes (8 B..64 KiB) and lifetimes, 1 thread"),
        W("pareto-mt", "stress", ["pareto", T, "24000000", "4194304", "65536"],
          ["pareto", T, "4000000", "1048576", "65536"], desc="Pareto sizes and lifetimes, all threads"),
        W("mstress", "stress", ["mstress", T, "30", "20000", "100000"],
          ["mstress", T, "12", "20000", "50000"], desc="objects migrate and survive thread exit"),
        W("orphan", "stress", ["orphan", str(max(1, NCPU)), "1", "2000", "2000", "2048"],
          ["orphan", str(max(1, NCPU)), "1", "400", "2000", "2048"],
          desc="producer threads allocate a batch and exit; a consumer frees it after they are gone"),
        W("glibc-simple", "stress", ["glibc", "simple", "7500", "1000"], ["glibc", "simple", "1500", "1000"],
          desc="bursts of same-size blocks, 1 thread"),
        W("glibc-thread", "stress", ["glibc", "thread", T, "15000000", "1000"], ["glibc", "thread", T, "3000000", "1000"],
          desc="random working-set replacement per thread"),
        W("rptest", "stress", ["rptest", T, "1200000", "2048"], ["rptest", T, "250000", "2048"],
          desc="aligned allocations, cross-thread"),
        W("realloc", "stress", ["realloc", "64", "40", "262144"], ["realloc", "64", "12", "131072"],
          desc="realloc growth with content checks"),
        W("biggrow", "stress", ["biggrow", "3", "256", "1024"], ["biggrow", "1", "64", "1024"],
          desc="a 256 MiB and a 64 MiB buffer grown by 1 MiB reallocs, content checked"),
        W("strgrow", "stress", ["strgrow", "300", "15000000", "2048", "8192", "16"],
          ["strgrow", "300", "3000000", "2048", "8192", "16"], desc="300 strings grown by 1..16 B reallocs to 2..8 KiB"),
        W("keepgrow", "stress", ["keepgrow", "200000", "16", "1000", "16"], ["keepgrow", "50000", "16", "1000", "16"],
          desc="200,000 strings grown by 1..16 B reallocs to 16..1000 B, all kept"),
        W("phases", "stress", ["phases", "300", "6"], ["phases", "64", "6"],
          desc="6 phases of 300 MiB of small objects of one size (64..4096 B), each freed before the next"),
        W("large", "stress", ["large", T, "150", "4", "16"], ["large", T, "30", "4", "16"],
          desc="1..16 MiB blocks, every page touched"),
        W("large-loop", "stress", ["large", "1", "1500", "1", "32"], ["large", "1", "300", "1", "32"],
          desc="one 1..32 MiB block at a time allocated, touched, freed, 1 thread"),
        W("hugewalk", "stress", ["hugewalk", "384", "6000000"], ["hugewalk", "128", "2000000"],
          desc="384 MiB of 16..512 B objects visited in random order: TLB-bound (metrics walk_ns, huge_mib)"),
        W("release", "memory", ["release", "64", "400", "10", "2000"], ["release", "16", "100", "3", "1000"],
          geo=("rss",), desc="RSS after freeing small/medium/large phases, while idle (time: mostly fixed waits)"),
        # The memory-return target: RSS under 15% of the peak after 90% of a 1 GiB working set
        # is freed, idle for the decay time + 1 s, and after malloc_trim(0). The figures are the
        # metrics (% of what the phase added); time and peak RSS are the same work for everyone.
        W("purge-small", "memory", ["purge", "small", "1024", "1250"], ["purge", "small", "256", "1250"], geo=(),
          desc="1 GiB of 16..512 B blocks, the oldest 90% freed: RSS after 1.25 s idle and after malloc_trim(0)"),
        W("purge-large", "memory", ["purge", "large", "1024", "1250"], ["purge", "large", "256", "1250"], geo=(),
          desc="1 GiB of 256 KiB..2 MiB blocks, the oldest 90% freed: RSS after 1.25 s idle and after malloc_trim(0)"),
        W("manythreads", "memory", ["manythreads", "64", "3", "4194304"], ["manythreads", "32", "2", "2097152"],
          desc="64 threads alive at once after bursts of small objects: what per-thread caches hold"),
    ]
    for t in range(1, NCPU + 1):
        ws.append(W("scale-%d" % t, "scaling", ["mtest", str(t), "40000000", "64", "512"],
                    ["mtest", str(t), "10000000", "64", "512"], desc="malloc-test, %d thread(s), fixed work per thread" % t))
    ws += [
        W("redis", "real", {"n": 50000}, {"n": 10000}, kind="redis",
          desc="redis-server (preloaded) driven by redis-benchmark"),
        W("sqlite", "real", {"rows": 200000}, {"rows": 40000}, kind="sqlite",
          desc="sqlite3 CLI on a generated SQL workload, output checked"),
        W("python", "real", {"scale": 20}, {"scale": 5}, kind="python",
          desc="python3 allocation-heavy script (PYTHONMALLOC=malloc), output checked"),
        W("pygrow", "real", {"script": "pygrow.py", "scale": 6, "budget_mib": 48},
          {"script": "pygrow.py", "scale": 3, "budget_mib": 24}, kind="python",
          desc="python3 growing lists, dicts, bytes, str to 8 KiB..2 MiB (PYTHONMALLOC=malloc), output checked"),
        # Debian programs, as mimalloc-bench's "big" benchmarks; each one's output is compared with its run
        # without LD_PRELOAD (bench/README.md).
        W("lua", "real", {"scale": 6}, {"scale": 3}, kind="lua",
          desc="lua5.4 allocation-heavy script (tables, strings, closures), checksums checked"),
        W("z3", "real", {"bits": 16, "n": 6}, {"bits": 16, "n": 3}, kind="z3",
          desc="z3 on generated QF_BV problems (factor semiprimes / primes), sat/unsat and models checked"),
        W("ghostscript", "real", {"pages": 48, "shapes": 500, "dpi": 100}, {"pages": 24, "shapes": 400, "dpi": 100},
          kind="ghostscript", desc="gs renders a generated vector/text PostScript document to ppmraw, image checked"),
        W("rocksdb", "real", {"num": 300000}, {"num": 200000}, kind="rocksdb",
          desc="RocksDB db_bench fillrandom+readrandom in a temp dir, op and found counts checked"),
        W("memcached", "real", {"threads": 4, "ops": 40000, "max_value": 65536, "keys": 3000},
          {"threads": 4, "ops": 20000, "max_value": 65536, "keys": 3000}, kind="memcached",
          desc="memcached (preloaded) driven by memcl: set/get/delete of random-size values, every get checked"),
        W("wcet", "latency", ["wcet", "1800", "3000", T], ["wcet", "150", "3000", T],
          desc="tail latency: pinned threads, asymmetric batches, shuffled remote frees"),
        # The paper's wcet_test: 10^7 operations per thread, 8 runs per allocator (mean and spread).
        W("wcet_test", "latency", ["wcet_test", "10000000", T], ["wcet_test", "1000000", T], runs=(8, 8),
          desc="paper's wcet_test: pinned threads, groups of one size class 16..2048, asymmetric batches up to "
               "8 MiB live, shuffled global list freed by the other threads; ns percentiles, 8 runs"),
    ]
    return ws


SMOKE_W = W("smoke", "smoke", None, ["larson", "2", "2", "200", "5000", "8", "512"], desc="tiny larson")


# ---------------------------------------------------------------- running
class Result(dict):
    pass


def measure(argv, preload, timeout, env_extra=None, stdin_path=None, cwd=None):
    """Runs argv through the smtime wrapper (bench/lib/smtime.c): LD_PRELOAD=preload for
    the program only, a time limit, elapsed time and ru_maxrss from wait4().
    Returns dict(rc, time, rss_kib, out, err, timed_out); rc is 128+signal for a signal."""
    env = dict(CLEAN_ENV)
    if env_extra:
        env.update(env_extra)
    env["SM_PRELOAD"] = preload or ""
    with tempfile.TemporaryFile() as fo, tempfile.TemporaryFile() as fe, \
            tempfile.NamedTemporaryFile(prefix="sm-stats-") as fs:
        fin = open(stdin_path, "rb") if stdin_path else subprocess.DEVNULL
        try:
            p = subprocess.run([SMTIME, str(timeout), fs.name] + argv, stdin=fin, stdout=fo, stderr=fe, env=env,
                               cwd=cwd)
        finally:
            if stdin_path:
                fin.close()
        fo.seek(0)
        fe.seek(0)
        out = fo.read().decode(errors="replace")
        err = fe.read().decode(errors="replace")
        stats = open(fs.name).read().split()
    if len(stats) != 4:
        return {"rc": 125, "time": 0.0, "rss_kib": 0, "out": out, "err": err + "\nsmtime failed (status %d)" % p.returncode,
                "timed_out": False}
    return {"rc": int(stats[2]), "time": float(stats[0]), "rss_kib": int(stats[1]), "out": out, "err": err,
            "timed_out": stats[3] == "1"}


def why_failed(m):
    if m["timed_out"]:
        return "timeout"
    rc = m["rc"]
    tail = [l for l in m["err"].strip().splitlines() if l.strip()]
    last = tail[-1][:120] if tail else ""
    if rc > 128:
        sig = rc - 128
        try:
            signame = signal.Signals(sig).name
        except ValueError:
            signame = "signal %d" % sig
        return "killed by %s%s" % (signame, (": " + last) if last else "")
    return "exit %d%s" % (rc, (": " + last) if last else "")


def parse_metrics(out):
    ms = {}
    for line in out.splitlines():
        if line.startswith("metric "):
            parts = line.split()
            if len(parts) >= 3:
                try:
                    ms[parts[1]] = float(parts[2])
                except ValueError:
                    pass
    return ms


class Runner:
    def __init__(self, timeout, tmpdir):
        self.timeout = timeout
        self.tmp = tmpdir
        self.refs = {}
        self.alloc_env = {}  # environment the allocator needs (wcetstat+<alloc>: SUNMAO_WCET_OUT)

    def run(self, w, alloc):
        params = w["quick"] if (QUICK or SMOKE) else w["full"]
        kind = w["kind"]
        ws_out = None
        if alloc.get("wcetstat"):
            ws_out = os.path.join(self.tmp, "wcetstat-report.txt")
            if os.path.exists(ws_out):
                os.unlink(ws_out)
        self.alloc_env = {"SUNMAO_WCET_OUT": ws_out} if ws_out else {}
        if kind == "prog":
            argv = [os.path.join(BIN, params[0])] + params[1:]
            m = measure(argv, alloc["preload"], self.timeout, self.alloc_env)
            res = self._finish(m)
        else:
            res = getattr(self, "run_" + kind)(params, alloc)
        self.alloc_env = {}
        if ws_out and res["ok"]:
            try:
                with open(ws_out) as f:
                    wm = parse_metrics(f.read())
            except OSError:
                wm = {}
            if "malloc_samples" not in wm:
                res["ok"], res["reason"] = False, "no wcet_stat report from libwcetstat.so (SUNMAO_WCET_OUT)"
            for k, v in wm.items():
                res["metrics"]["ws_" + k] = v
        return res

    def _finish(self, m, check=None):
        r = {"ok": m["rc"] == 0, "time": m["time"], "rss_kib": m["rss_kib"], "metrics": parse_metrics(m["out"]),
             "reason": ""}
        if not r["ok"]:
            r["reason"] = why_failed(m)
        elif check:
            why = check(m)
            if why:
                r["ok"], r["reason"] = False, why
        return r

    # -- output-checked real programs: reference = same program without LD_PRELOAD
    # digest(m) -> the text compared with the reference run's (default: the whole stdout); prepare() runs
    # before every run (reference included), e.g. to clear a database directory.
    def _reference(self, key, argv, env_extra=None, stdin_path=None, digest=None, prepare=None):
        if key not in self.refs:
            if prepare:
                prepare()
            m = measure(argv, "", self.timeout * 2, env_extra, stdin_path)
            if m["rc"] != 0:
                die("reference run of %s failed without LD_PRELOAD: %s" % (key, why_failed(m)))
            self.refs[key] = hashlib.sha256((digest(m) if digest else m["out"]).encode()).hexdigest()
        return self.refs[key]

    def _checked(self, key, argv, alloc, env_extra=None, stdin_path=None, digest=None, prepare=None):
        ref = self._reference(key, argv, env_extra, stdin_path, digest, prepare)
        if prepare:
            prepare()
        m = measure(argv, alloc["preload"], self.timeout, dict(env_extra or {}, **self.alloc_env), stdin_path)

        def check(mm):
            if hashlib.sha256((digest(mm) if digest else mm["out"]).encode()).hexdigest() != ref:
                return "output differs from the reference run"
            return ""
        return self._finish(m, check)

    def _input(self, name, make):
        """A generated input file in the run's temp dir, written once."""
        path = os.path.join(self.tmp, name)
        if not os.path.exists(path):
            with open(path, "w") as f:
                f.write(make())
        return path

    def run_lua(self, params, alloc):
        lua = shutil.which("lua5.4") or "lua5.4"
        argv = [lua, os.path.join(ROOT, "bench", "workloads", "luaalloc.lua"), str(params["scale"])]
        return self._checked("lua-%d" % params["scale"], argv, alloc)

    def run_z3(self, params, alloc):
        bits, n = params["bits"], params["n"]
        path = self._input("z3-%d-%d.smt2" % (bits, n), lambda: z3_problem(bits, n))
        return self._checked("z3-%d-%d" % (bits, n), [shutil.which("z3") or "z3", "-smt2", path], alloc)

    def run_ghostscript(self, params, alloc):
        pages, shapes, dpi = params["pages"], params["shapes"], params["dpi"]
        path = self._input("gs-%d-%d.ps" % (pages, shapes), lambda: ps_document(pages, shapes))
        outf = os.path.join(self.tmp, "gs-out.ppm")
        argv = [shutil.which("gs") or "gs", "-dSAFER", "-dNOPAUSE", "-dBATCH", "-dQUIET", "-sDEVICE=ppmraw",
                "-r%d" % dpi, "-sOutputFile=" + outf, path]

        def digest(m):  # gs's stdout and the image's hash; the image is removed (it is large)
            h = hashlib.sha256()
            try:
                with open(outf, "rb") as f:
                    for blk in iter(lambda: f.read(1 << 20), b""):
                        h.update(blk)
                os.unlink(outf)
            except OSError:
                return m["out"] + "\nno output image"
            return m["out"] + "\nimage sha256 " + h.hexdigest()
        return self._checked("gs-%d-%d-%d" % (pages, shapes, dpi), argv, alloc, digest=digest)

    def run_rocksdb(self, params, alloc):
        num = params["num"]
        db = os.path.join(self.tmp, "rocksdb")
        argv = [shutil.which("db_bench") or "db_bench", "--benchmarks=fillrandom,readrandom", "--num=%d" % num,
                "--db=" + db, "--wal_dir=" + db, "--seed=42", "--threads=1", "--value_size=100",
                "--compression_type=none", "--progress_reports=false", "--stats_interval=0"]

        def digest(m):  # the benchmarks' operation counts and readrandom's found count (times vary)
            shutil.rmtree(db, ignore_errors=True)
            got = re.findall(r"^(fillrandom|readrandom)\s*:.*?\s(\d+) operations;.*?(\(\d+ of \d+ found\))?\s*$",
                             m["out"], re.M)
            return "; ".join("%s %s %s" % g for g in got) if len(got) == 2 else "unexpected output:\n" + m["out"]

        def prepare():
            shutil.rmtree(db, ignore_errors=True)
        res = self._checked("rocksdb-%d" % num, argv, alloc, digest=digest, prepare=prepare)
        shutil.rmtree(db, ignore_errors=True)
        return res

    def _serve(self, name, argv, alloc, ready, load, stop):
        """A server run: argv(port) started on a free loopback port with the allocator preloaded,
        ready(port) polled until it answers, load(port) -> (measure result, metrics) or a failure
        reason, the server's peak RSS read, stop(port, srv) asked of it and exit status 0 required."""
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        env = dict(CLEAN_ENV)
        env.update(self.alloc_env)
        if alloc["preload"]:
            env["LD_PRELOAD"] = alloc["preload"]
        with open(os.path.join(self.tmp, "%s-%d.log" % (name, port)), "wb") as lf:
            srv = subprocess.Popen(argv(port), stdout=lf, stderr=lf, env=env)

        def fail(why):
            if srv.poll() is None:
                srv.kill()
            srv.wait()
            return {"ok": False, "time": 0.0, "rss_kib": 0, "metrics": {}, "reason": why}
        try:
            deadline = time.monotonic() + 10
            while True:
                if srv.poll() is not None:
                    return fail("%s exited with %d at start" % (name, srv.returncode))
                if ready(port):
                    break
                if time.monotonic() > deadline:
                    return fail("%s did not answer" % name)
                time.sleep(0.05)
            got = load(port)
            if isinstance(got, str):
                return fail(got)
            m, metrics = got
            hwm = 0
            try:
                with open("/proc/%d/status" % srv.pid) as f:
                    for line in f:
                        if line.startswith("VmHWM:"):
                            hwm = int(line.split()[1])
            except OSError:
                return fail("%s vanished" % name)
            stop(port, srv)
            try:
                rc = srv.wait(timeout=10)
            except subprocess.TimeoutExpired:
                return fail("%s did not shut down" % name)
            if rc != 0:
                return fail("%s exited with %d" % (name, rc))
            return {"ok": True, "time": m["time"], "rss_kib": hwm, "metrics": metrics, "reason": ""}
        finally:
            if srv.poll() is None:
                srv.kill()
                srv.wait()

    def run_memcached(self, params, alloc):
        def argv(port):
            a = ["memcached", "-l", "127.0.0.1", "-p", str(port), "-U", "0", "-m", "1024", "-t", "2", "-c", "64"]
            return a + (["-u", "root"] if os.geteuid() == 0 else [])  # it refuses root without -u

        def ready(port):
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=2) as c:
                    c.sendall(b"version\r\n")
                    return c.recv(64).startswith(b"VERSION ")
            except OSError:
                return False

        def load(port):
            total = params["threads"] * params["ops"]
            cl = [os.path.join(BIN, "memcl"), str(port), str(params["threads"]), str(params["ops"]),
                  str(params["max_value"]), str(params["keys"])]
            m = measure(cl, "", self.timeout)
            if m["rc"] != 0:
                return "memcl: " + why_failed(m)
            if not m["out"].startswith("ok %d " % total):
                return "memcl did not report %d operations" % total
            return m, parse_metrics(m["out"])
        return self._serve("memcached", argv, alloc, ready, load, lambda port, srv: srv.terminate())

    def run_sqlite(self, params, alloc):
        rows = params["rows"]
        path = os.path.join(self.tmp, "sqlite-%d.sql" % rows)
        if not os.path.exists(path):
            with open(path, "w") as f:
                f.write(sqlite_script(rows))
        argv = ["sqlite3", "-batch", "-init", "/dev/null", ":memory:"]
        return self._checked("sqlite-%d" % rows, argv, alloc, stdin_path=path)

    def run_python(self, params, alloc):
        py = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else shutil.which("python3")
        script = params.get("script", "pyalloc.py")
        args = [str(params["scale"])] + ([str(params["budget_mib"])] if "budget_mib" in params else [])
        argv = [py, "-S", os.path.join(ROOT, "bench", "workloads", script)] + args
        env = {"PYTHONMALLOC": "malloc", "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"}
        return self._checked("python-%s-%s" % (script, "-".join(args)), argv, alloc, env_extra=env)

    def run_redis(self, params, alloc):
        n = params["n"]

        def cli(port):
            return ["redis-cli", "-h", "127.0.0.1", "-p", str(port)]

        def argv(port):
            return ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                    "--daemonize", "no", "--protected-mode", "no", "--dir", self.tmp, "--logfile", ""]

        def ready(port):
            r = subprocess.run(cli(port) + ["ping"], capture_output=True, text=True, env=CLEAN_ENV)
            return r.stdout.strip() == "PONG"

        def load(port):
            bench = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-q", "-n", str(n), "-c", "50",
                     "-r", "100000", "-d", "128", "-t", "set,get,incr,lpush,lpop,sadd,hset,lrange_100"]
            m = measure(bench, "", self.timeout)
            if m["rc"] != 0:
                return "redis-benchmark: " + why_failed(m)
            rps = re.findall(r"^\s*([A-Z_0-9 ()a-z]+?):\s*([0-9.]+) requests per second", m["out"].replace("\r", "\n"), re.M)
            if len(rps) < 8:
                return "redis-benchmark printed %d results, expected 8" % len(rps)
            val = "sunmao-%d-%s" % (port, alloc["name"])
            r1 = subprocess.run(cli(port) + ["set", "sm:check", val], capture_output=True, text=True, env=CLEAN_ENV)
            r2 = subprocess.run(cli(port) + ["get", "sm:check"], capture_output=True, text=True, env=CLEAN_ENV)
            if r1.stdout.strip() != "OK" or r2.stdout.strip() != val:
                return "key round-trip failed"
            metrics = {}
            for name, v in rps:
                metrics.setdefault("rps_" + name.strip().split()[0].lower(), float(v))
            return m, metrics

        def stop(port, srv):
            subprocess.run(cli(port) + ["shutdown", "nosave"], capture_output=True, env=CLEAN_ENV)
        return self._serve("redis-server", argv, alloc, ready, load, stop)


def lcg(seed):
    """A deterministic random source for the generated inputs: r(n) -> 0..n-1."""
    s = [seed]

    def r(n):
        s[0] = (s[0] * 6364136223846793005 + 1442695040888963407) % 2 ** 64
        return (s[0] >> 33) % n
    return r


def z3_problem(bits, n):
    """SMT-LIB2 for z3: n problems, each in its own push/pop: factor N = p*q (p, q primes of `bits` bits)
    as x*y over 2*bits-bit vectors with 1 < x <= y < 2^bits (sat, a unique model: (get-value (x y)));
    every third N is a prime (unsat). Bit-blasted multiplication: about 1 s per problem with bits=16."""
    def isprime(x):
        if x < 3 or x % 2 == 0:
            return x == 2
        i = 3
        while i * i <= x:
            if x % i == 0:
                return False
            i += 2
        return True
    r = lcg(7)

    def prime():
        while True:
            c = r(2 ** bits) | (1 << (bits - 1)) | 1
            if isprime(c):
                return c
    w = 2 * bits
    out = ["(set-option :produce-models true)", "(set-logic QF_BV)"]
    for k in range(n):
        unsat = k % 3 == 2
        if unsat:
            N = 4
            while not isprime(N):
                N = (prime() << bits) + prime()
        else:
            N = prime() * prime()
        out += ["(push 1)", "(declare-fun x () (_ BitVec %d))" % w, "(declare-fun y () (_ BitVec %d))" % w,
                "(assert (= (bvmul x y) (_ bv%d %d)))" % (N, w),
                "(assert (bvult x (_ bv%d %d)))" % (2 ** bits, w), "(assert (bvult y (_ bv%d %d)))" % (2 ** bits, w),
                "(assert (bvugt x (_ bv1 %d)))" % w, "(assert (bvule x y))", "(check-sat)"]
        out += [] if unsat else ["(get-value (x y))"]
        out.append("(pop 1)")
    return "\n".join(out) + "\n"


def ps_document(pages, shapes):
    """A PostScript document of `pages` A4 pages, each with `shapes` random (fixed seed) elements: filled
    Bezier paths (nonzero / even-odd), dashed polylines, arcs, rotated text in four standard fonts, stars,
    clipped bands of thin rectangles."""
    r = lcg(12345)
    out = ["%!PS-Adobe-3.0", "%%%%Pages: %d" % pages, "%%EndComments",
           "/F { findfont exch scalefont setfont } bind def",
           "/star { gsave translate rotate dup scale newpath 0 1 moveto 4 { 144 rotate 0 1 lineto } repeat "
           "closepath fill grestore } bind def"]
    fonts = ["Times-Roman", "Helvetica-Bold", "Courier", "Times-Italic"]
    for pg in range(1, pages + 1):
        out.append("%%%%Page: %d %d" % (pg, pg))
        for _ in range(shapes):
            k = r(6)
            out.append("%.3f %.3f %.3f setrgbcolor" % (r(1000) / 1000, r(1000) / 1000, r(1000) / 1000))
            x, y = r(595), r(842)
            if k == 0:
                pts = " ".join("%d %d %d %d %d %d curveto" % tuple(r(595) if j % 2 == 0 else r(842) for j in range(6))
                               for _ in range(3))
                out.append("newpath %d %d moveto %s closepath %s" % (x, y, pts, "fill" if r(2) else "eofill"))
            elif k == 1:
                pts = " ".join("%d %d lineto" % (r(595), r(842)) for _ in range(2 + r(8)))
                out.append("%.1f setlinewidth [%d %d] 0 setdash newpath %d %d moveto %s stroke [] 0 setdash"
                           % (0.5 + r(40) / 10, 1 + r(9), 1 + r(9), x, y, pts))
            elif k == 2:
                out.append("newpath %d %d %d 0 360 arc %s" % (x, y, 5 + r(80), "fill" if r(2) else "stroke"))
            elif k == 3:
                words = " ".join("".join(chr(97 + r(26)) for _ in range(2 + r(8))) for _ in range(2 + r(6)))
                out.append("gsave %d /%s F %d %d moveto %d rotate (%s) show grestore"
                           % (6 + r(30), fonts[r(4)], x, y, r(360), words))
            elif k == 4:
                out.append("%d %d %d %d star" % (5 + r(40), r(72), x, y))
            else:
                w, h = 20 + r(150), 20 + r(150)
                out.append("gsave newpath %d %d %d %d rectclip 0 1 %d { dup %d div dup 1 exch sub 0.5 setrgbcolor "
                           "%d exch %d add %d 1 rectfill } for grestore" % (x, y, w, h, h, h, x, y, w))
        out.append("showpage")
    out.append("%%EOF")
    return "\n".join(out) + "\n"


def sqlite_script(rows):
    """A deterministic SQL workload: bulk inserts, indexes, joins, group by, sorting,
    string building, a recursive CTE, updates and deletes; prints aggregates."""
    return """PRAGMA cache_size=-65536;
CREATE TABLE item(id INTEGER PRIMARY KEY, grp INTEGER, name TEXT, payload TEXT, price REAL);
CREATE TABLE tag(item_id INTEGER, label TEXT);
BEGIN;
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < {n})
INSERT INTO item SELECT x, x % 97, 'item-' || x, printf('%.*c', 16 + x % 200, 'x') || hex(x * 2654435761 % 4294967296), (x * 7919 % 10007) / 10.0 FROM c;
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < {n2})
INSERT INTO tag SELECT (x * 48271) % {n} + 1, 'label-' || (x % 503) FROM c;
COMMIT;
CREATE INDEX item_grp ON item(grp, price);
CREATE INDEX tag_item ON tag(item_id);
SELECT count(*), sum(length(payload)), round(sum(price), 2) FROM item;
SELECT grp, count(*), round(avg(price), 3), max(length(name)) FROM item GROUP BY grp ORDER BY grp LIMIT 10;
SELECT t.label, count(*), round(sum(i.price), 1) FROM tag t JOIN item i ON i.id = t.item_id GROUP BY t.label ORDER BY 2 DESC, 1 LIMIT 10;
SELECT length(group_concat(name, ',')) FROM (SELECT name FROM item ORDER BY payload DESC LIMIT 20000);
UPDATE item SET payload = payload || upper(substr(payload, 1, 40)) WHERE id % 3 = 0;
DELETE FROM item WHERE id % 5 = 0;
SELECT count(*), sum(length(payload)) FROM item;
SELECT id, name, price FROM item ORDER BY price DESC, id LIMIT 5;
SELECT count(DISTINCT label) FROM tag WHERE item_id IN (SELECT id FROM item WHERE grp < 50);
""".format(n=rows, n2=rows * 2)


# ---------------------------------------------------------------- statistics
def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def summarise(runs):
    """runs: list of run dicts for one (workload, allocator)."""
    if not runs:
        return None
    bad = [r for r in runs if not r["ok"]]
    if bad:
        return {"ok": False, "reason": bad[0]["reason"], "n": len(runs)}
    ts = [r["time"] for r in runs]
    rs = [r["rss_kib"] for r in runs]
    metrics, mrange, mmean = {}, {}, {}
    for k in runs[0]["metrics"]:
        vals = [r["metrics"][k] for r in runs if k in r["metrics"]]
        metrics[k] = statistics.median(vals)
        mrange[k] = [min(vals), max(vals)]
        mmean[k] = statistics.fmean(vals)
    return {"ok": True, "n": len(runs), "time": statistics.median(ts), "tmin": min(ts), "tmax": max(ts),
            "rss": statistics.median(rs), "rmin": min(rs), "rmax": max(rs), "metrics": metrics, "mrange": mrange,
            "mmean": mmean}


def fmt_dur(s):
    s = int(max(0, s))
    return "%d:%02d" % (s // 60, s % 60)


# ---------------------------------------------------------------- machine
def sh(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def machine_info():
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = ""
    try:
        with open("/proc/meminfo") as f:
            mem = "%.1f GiB" % (int(f.readline().split()[1]) / 1048576)
    except (OSError, ValueError, IndexError):
        pass
    pk = {}
    for p in ["libc6", "libjemalloc2", "libtcmalloc-minimal4", "libmimalloc2.0", "libtbbmalloc2", "redis-server",
              "redis-tools", "sqlite3", "python3", "lua5.4", "z3", "ghostscript", "rocksdb-tools", "memcached",
              "gnuplot-nox"]:
        pk[p] = sh(["dpkg-query", "-W", "-f=${Version}", p]) or "not installed"
    info = {"cpu": cpu or platform.processor(), "cores": NCPU, "memory": mem, "kernel": platform.release(),
            "os": sh(["sh", "-c", ". /etc/os-release 2>/dev/null; echo $PRETTY_NAME"]),
            "git": sh(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"]), "packages": pk,
            "gcc": sh(["gcc", "-dumpfullversion"])}
    return info


# ---------------------------------------------------------------- charts
def gnuplot(script, cwd):
    if not shutil.which("gnuplot"):
        return "gnuplot not installed"
    r = subprocess.run(["gnuplot"], input=script, capture_output=True, text=True, cwd=cwd)
    return r.stderr.strip() if r.returncode else ""


def bar_chart(cwd, fname, title, ylabel, names, rows):
    """rows: [(workload, [value or None per allocator])]"""
    dat = fname.replace(".svg", ".dat")
    with open(os.path.join(cwd, dat), "w") as f:
        f.write("workload " + " ".join('"%s"' % n for n in names) + "\n")
        for w, vals in rows:
            f.write('"%s" ' % w + " ".join("%.5g" % v if v else "?" for v in vals) + "\n")
    width = max(900, 60 * len(rows) + 200)
    vals = [v for _, vs in rows for v in vs if v]
    lo = 2 ** math.floor(math.log2(min(vals)) - 0.5) if vals else 0.25
    hi = 2 ** math.ceil(math.log2(max(vals)) + 0.3) if vals else 4
    script = """set terminal svg size {w},480 dynamic enhanced font "sans,11" background "white"
set output "{out}"
set title "{title}"
set ylabel "{yl}"
set datafile missing "?"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set logscale y 2
set grid ytics
set xtics rotate by 45 right scale 0 font ",10"
set bmargin 7
set key outside top center horizontal
set yrange [{lo}:{hi}]
plot for [i=2:{n1}] "{dat}" using i:xtic(1) title columnhead(i)
""".format(lo=lo, hi=hi, w=width, out=fname, title=title, yl=ylabel, n1=len(names) + 1, dat=dat)
    return gnuplot(script, cwd)


def latency_chart(cwd, fname, names, lat):
    """lat: {alloc: {"malloc": [6 values], "free": [...]}}"""
    errs = []
    plots = []
    for op in ("malloc", "free"):
        dat = "latency-%s.dat" % op
        with open(os.path.join(cwd, dat), "w") as f:
            f.write("pct " + " ".join('"%s"' % n for n in names) + "\n")
            for i, p in enumerate(PCTS):
                vals = [lat.get(n, {}).get(op) for n in names]
                f.write('"%s" ' % p + " ".join("%g" % max(1, v[i]) if v else "?" for v in vals) + "\n")
        plots.append('set title "%s latency (cycles, sampled 1 in 8)"\nplot for [i=2:%d] "%s" using 0:i:xtic(1) with linespoints lw 2 title columnhead(i)\n'
                     % (op, len(names) + 1, dat))
    script = """set terminal svg size 1100,460 dynamic enhanced font "sans,11" background "white"
set output "{out}"
set datafile missing "?"
set logscale y 10
set format y "10^{{%L}}"
set grid
set xlabel "percentile"
set ylabel "cycles"
set key top left
set multiplot layout 1,2
{p0}{p1}unset multiplot
""".format(out=fname, p0=plots[0], p1=plots[1])
    e = gnuplot(script, cwd)
    if e:
        errs.append(e)
    return "; ".join(errs)


# ---------------------------------------------------------------- main
def rerender(path):
    """REPORT_FROM: the report of an earlier run written again from its results.json (the tables and
    sections of this version of the harness, the run's own machine facts), nothing run."""
    global QUICK
    try:
        with open(path) as f:
            js = json.load(f)
        cfg = js["config"]
        QUICK = bool(cfg["quick"])
        data = {}
        for k, v in js["runs"].items():
            w, a = k.split("/", 1)
            data[(w, a)] = v
        allocs, ws = cfg["allocators"], cfg["workloads"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        die("REPORT_FROM=%s: not a results.json of bench/run.sh (%s)" % (path, e))
    baseline = ENV.get("BASELINE", "") or cfg["baseline"]
    if baseline not in {a["name"] for a in allocs}:
        die("BASELINE=%s is not among the allocators of %s" % (baseline, path))
    report(ws, allocs, baseline, cfg["rounds"], cfg["timeout_s"], data, cfg["wall_s"], info=js.get("machine"))
    return 0


def main():
    if ENV.get("REPORT_FROM"):
        return rerender(ENV["REPORT_FROM"])
    allocs, problems = discover_allocators()
    want = ENV.get("ALLOCS", "").replace(",", " ").split()
    allocs += wcetstat_variants(want, allocs, problems)
    if want:
        known = {a["name"] for a in allocs} | set(problems)
        for n in want:
            if n not in known:
                die("ALLOCS: unknown allocator '%s' (known: %s)" % (n, " ".join(sorted(known))))
        allocs = [a for a in allocs if a["name"] in want]
        problems = {k: v for k, v in problems.items() if k in want}
    if SMOKE:
        return smoke(allocs, problems)

    ws = workloads()
    wantw = ENV.get("BENCH", "").replace(",", " ").split()
    if wantw:
        names = {w["name"] for w in ws}
        groups = {w["group"] for w in ws}
        for n in wantw:
            if n not in names and n not in groups and not any(re.fullmatch(n.replace("*", ".*"), x) for x in names):
                die("BENCH: unknown workload '%s' (workloads: %s; groups: %s)" % (n, " ".join(w["name"] for w in ws),
                                                                                  " ".join(sorted(groups))))
        ws = [w for w in ws if w["name"] in wantw or w["group"] in wantw
              or any(re.fullmatch(n.replace("*", ".*"), w["name"]) for n in wantw)]
    need = {"redis": ["redis-server", "redis-benchmark", "redis-cli"], "sqlite": ["sqlite3"], "lua": ["lua5.4"],
            "z3": ["z3"], "ghostscript": ["gs"], "rocksdb": ["db_bench"], "memcached": ["memcached"]}
    for w in list(ws):
        missing = [t for t in need.get(w["kind"], []) if not shutil.which(t)]
        if missing:
            print("bench: skipping %s: %s not installed" % (w["name"], " ".join(missing)))
            ws.remove(w)
    if not ws or not allocs:
        die("nothing to run (workloads: %d, allocators: %d)" % (len(ws), len(allocs)))
    baseline = ENV.get("BASELINE", "") or "glibc"
    if baseline not in {a["name"] for a in allocs}:
        die("BASELINE=%s is not among the allocators measured (%s)" % (baseline, " ".join(a["name"] for a in allocs)))
    rounds = int(ENV.get("ROUNDS") or (1 if QUICK else 3))
    timeout = int(ENV.get("TIMEOUT") or (30 if QUICK else 90))
    for k, v in problems.items():
        print("bench: %s: %s" % (k, v.split(":", 1)[1]))

    names = [a["name"] for a in allocs]
    tmp = tempfile.mkdtemp(prefix="sm-bench-")
    runner = Runner(timeout, tmp)
    data = {}  # (w, a) -> [runs]
    failed = set()
    total = sum(runs_in_round(w, rounds, r) for r in range(rounds) for w in ws) * len(allocs)
    done = 0
    t_start = time.monotonic()
    print("bench: %d workload(s) x %d allocator(s) x %d round(s) = %d runs%s; baseline %s; timeout %ds per run"
          % (len(ws), len(allocs), rounds, total, " (QUICK)" if QUICK else "", baseline, timeout))
    print("bench: allocators: " + ", ".join("%s%s" % (a["name"], " (%s)" % a["preload"] if a["preload"] else "")
                                           for a in allocs))
    sys.stdout.flush()
    try:
        for r in range(rounds):
            for w in ws:
                nrep = runs_in_round(w, rounds, r)
                for rep in range(nrep):
                    # the starting allocator rotates between rounds, and between a workload's runs in one
                    k = (r + rep) % len(allocs)
                    for a in allocs[k:] + allocs[:k]:
                        key = (w["name"], a["name"])
                        done += 1
                        if key in failed:  # a failed case is FAIL already; do not spend time on it again
                            res = {"ok": False, "time": 0.0, "rss_kib": 0, "metrics": {},
                                   "reason": "skipped after failure", "skipped": True}
                        else:
                            res = runner.run(w, a)
                        res["round"] = r + 1
                        data.setdefault(key, []).append(res)
                        if not res["ok"]:
                            failed.add(key)
                        el = time.monotonic() - t_start
                        eta = el / done * (total - done)
                        if res.get("skipped"):
                            line = "FAIL (not rerun)"
                        elif res["ok"]:
                            line = "%8.3fs %9.1f MiB" % (res["time"], res["rss_kib"] / 1024)
                        else:
                            line = "FAIL: " + res["reason"]
                        rlabel = "r%d" % (r + 1) if nrep == 1 else "r%d.%d" % (r + 1, rep + 1)
                        print("[%3d/%d %s ETA %s] %-4s %-14s %-10s %s" % (done, total, fmt_dur(el), fmt_dur(eta),
                                                                        rlabel, w["name"], a["name"], line))
                        sys.stdout.flush()
    except KeyboardInterrupt:
        print("bench: interrupted; reporting what was measured")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    wall = time.monotonic() - t_start
    nfail = report(ws, allocs, baseline, rounds, timeout, data, wall)
    strict = ENV.get("STRICT", "0") not in ("", "0", "no", "false")
    return 1 if (strict and nfail) else 0


def smoke(allocs, problems):
    tmp = tempfile.mkdtemp(prefix="sm-smoke-")
    runner = Runner(int(ENV.get("TIMEOUT") or 20), tmp)
    nbad = 0
    try:
        for a in allocs:
            res = runner.run(SMOKE_W, a)
            if res["ok"]:
                print("ok bench: smoke/%s (%.3fs, %.1f MiB)" % (a["name"], res["time"], res["rss_kib"] / 1024))
            else:
                nbad += 1
                print("not ok bench: smoke/%s: %s" % (a["name"], res["reason"]))
        for name, why in problems.items():
            kind, msg = why.split(":", 1)
            if kind == "skip":
                print("skip bench: smoke/%s: %s" % (name, msg))
            else:
                nbad += 1
                print("not ok bench: smoke/%s: %s" % (name, msg))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if nbad else 0


def against_peers(tw, allocs, summ):
    """Where each sunmao instance stands against the peers measured in the same run (issue 20's
    targets): per workload the fastest peer's time and the leanest peer's peak RSS (glibc counts as
    a peer), and per instance the geometric means against the fastest and the leanest peer overall.
    Returns None when the run has no peer or no instance."""
    peers = [a["name"] for a in allocs if a["kind"] in ("baseline", "peer")]
    insts = [a["name"] for a in allocs if a["kind"] == "sunmao"]
    if not peers or not insts:
        return None

    def ok(w, a):
        s = summ.get((w, a))
        return s if s and s["ok"] else None

    def best(w, field):  # (peer, value) with the least median among the peers that succeeded; ties: the first
        cand = [(ok(w, a)[field], i, a) for i, a in enumerate(peers) if ok(w, a)]
        return (min(cand)[2], min(cand)[0]) if cand else (None, None)

    def common(field):  # the workloads of the field's geomean that every peer and instance completed
        return [w["name"] for w in tw if field in w.get("geo", ("time", "rss"))
                and all(ok(w["name"], a) and ok(w["name"], a)[field] > 0 for a in peers + insts)]

    def geo_vs(a, peer, field):  # geomean of a/peer over common(field)
        rs = [ok(w, a)[field] / ok(w, peer)[field] for w in common(field)]
        return geomean(rs), len(rs)

    def overall(field):  # the peer with the least geomean against the first peer, over common(field)
        return min((geo_vs(a, peers[0], field)[0] or float("inf"), i, a) for i, a in enumerate(peers))[2]

    rows = []
    for w in tw:
        bt, brss = best(w["name"], "time"), best(w["name"], "rss")
        cells = {}
        for i in insts:
            s = ok(w["name"], i)
            g = ok(w["name"], "glibc")
            cells[i] = None if not s else {
                "time_vs_best": s["time"] / bt[1] if bt[1] else None,
                "rss_vs_glibc": s["rss"] / g["rss"] if g and g["rss"] else None,
                "rss_vs_leanest": s["rss"] / brss[1] if brss[1] else None}
        rows.append({"workload": w["name"], "best_time": bt, "best_rss": brss, "cells": cells,
                     "in_geo": "time" in w.get("geo", ("time", "rss"))})
    fastest, leanest = overall("time"), overall("rss")
    summary = {}
    for i in insts:
        behind = sorted(((r["cells"][i]["time_vs_best"], r["workload"], r["best_time"][0]) for r in rows
                         if r["cells"][i] and r["cells"][i]["time_vs_best"] and round(r["cells"][i]["time_vs_best"], 2) > 1.0),
                        reverse=True)
        heavy = sorted(((r["cells"][i]["rss_vs_glibc"], r["workload"]) for r in rows
                        if r["cells"][i] and r["cells"][i]["rss_vs_glibc"] and round(r["cells"][i]["rss_vs_glibc"], 2) > 1.3),
                       reverse=True)
        why = [(w, "%.2fx %s" % (r, p), rounds_verdict(ok(w, i), ok(w, p)), KNOWN_GAPS.get((i, "time", w), ""))
               for r, w, p in behind]
        why += [(w, "RSS %.2fx glibc's" % r, "", KNOWN_GAPS.get((i, "rss", w), "")) for r, w in heavy]
        summary[i] = {"time_vs_fastest": geo_vs(i, fastest, "time"), "rss_vs_glibc": geo_vs(i, "glibc", "rss")
                      if "glibc" in peers else (None, 0), "rss_vs_leanest": geo_vs(i, leanest, "rss"),
                      "measured": sum(1 for r in rows if r["cells"][i] and r["cells"][i]["time_vs_best"]),
                      "behind": behind, "heavy": heavy, "why": why}
    return {"insts": insts, "fastest": fastest, "leanest": leanest, "rows": rows, "summary": summary}


def against_peers_md(ap):
    md = ["## Against the best peer", "",
          "Each sunmao instance against the peers of this run (glibc included): its median time over the "
          "fastest peer's on each workload, its peak RSS over glibc's and over the leanest peer's; the geometric "
          "means are over the workloads of the tables' geomeans that every peer and instance completed, against the "
          "peer whose own geomean there is the least (fastest: **%s**; leanest: **%s**)." % (ap["fastest"], ap["leanest"]),
          ""]
    for i in ap["insts"]:
        s = ap["summary"][i]

        def g(x):
            return "%.3f (%d workloads)" % (x[0], x[1]) if x[0] else "–"
        md.append("- **%s**: time %s the fastest peer's; peak RSS %s glibc's, %s the leanest peer's. At or under "
                  "the best peer's time on %d of %d workloads%s. Above 1.3x glibc's RSS: %s." % (
                      i, g(s["time_vs_fastest"]), g(s["rss_vs_glibc"]), g(s["rss_vs_leanest"]),
                      s["measured"] - len(s["behind"]), s["measured"],
                      ("; behind on " + ", ".join("%s %.2fx (%s)" % (w, r, p) for r, w, p in s["behind"]))
                      if s["behind"] else "", ", ".join("%s %.2fx" % (w, r) for r, w in s["heavy"]) or "none"))
    md.append("")
    for i in ap["insts"]:
        why = ap["summary"][i]["why"]
        if not why:
            continue
        md.append("Where **%s** misses the targets (1.0x the fastest peer's time, 1.3x glibc's RSS): how its rounds "
                  "compare with the peer's, and the measured reason where one is known (`KNOWN_GAPS` in "
                  "bench/harness.py):" % i)
        md.append("")
        for w, gap, rounds, reason in why:
            said = "; ".join(x for x in (rounds, reason) if x) or "no measured reason yet"
            md.append("- %s, %s: %s" % (w, gap, said))
        md.append("")
    md.append("| workload | fastest peer (s) | leanest peer (MiB) | " +
              " | ".join("%s: time / fastest, RSS / glibc, RSS / leanest" % i for i in ap["insts"]) + " |")
    md.append("|---|---|---|" + "---:|" * len(ap["insts"]))
    for r in ap["rows"]:
        bt, br = r["best_time"], r["best_rss"]
        cells = []
        for i in ap["insts"]:
            c = r["cells"][i]
            if not c:
                cells.append("FAIL")
                continue
            t = c["time_vs_best"]
            cells.append("%s, %s, %s" % (("**%.2fx**" if t and round(t, 2) > 1.0 else "%.2fx") % t if t else "–",
                                         ("**%.2fx**" if c["rss_vs_glibc"] and round(c["rss_vs_glibc"], 2) > 1.3 else "%.2fx") %
                                         c["rss_vs_glibc"] if c["rss_vs_glibc"] else "–",
                                         "%.2fx" % c["rss_vs_leanest"] if c["rss_vs_leanest"] else "–"))
        md.append("| %s%s | %s | %s | %s |" % (r["workload"], "" if r["in_geo"] else " (not in the geomeans)",
                                               "%s %.3f" % (bt[0], bt[1]) if bt[0] else "–",
                                               "%s %.1f" % (br[0], br[1] / 1024) if br[0] else "–", " | ".join(cells)))
    md.append("")
    return md


def report(ws, allocs, baseline, rounds, timeout, data, wall, info=None):
    """Prints the tables and writes the report and its raw data; info: the machine facts to state
    (default: this machine's now; a re-rendered report keeps its run's)."""
    names = [a["name"] for a in allocs]
    summ = {(w["name"], a): summarise(data.get((w["name"], a), [])) for w in ws for a in names}
    tw = [w for w in ws if w["group"] != "latency"] + [w for w in ws if w["group"] == "latency"]
    ap = against_peers(tw, allocs, summ)

    def ratio(w, a, field):
        s, b = summ[(w, a)], summ[(w, baseline)]
        if s and s["ok"] and b and b["ok"] and b[field] > 0:
            return s[field] / b[field]
        return None

    geo = {}
    for a in names:
        for field in ("time", "rss"):
            rs = [ratio(w["name"], a, field) for w in tw if field in w.get("geo", ("time", "rss"))]
            ok = [x for x in rs if x]
            geo[(a, field)] = (geomean(ok), len(ok), len(rs))
    nfail = {a: sum(1 for w in tw if summ[(w["name"], a)] and not summ[(w["name"], a)]["ok"]) for a in names}

    # ---- terminal tables
    colw = max(14, max(len(n) for n in names) + 2)
    wn = max(14, max(len(w["name"]) for w in ws) + 1)

    def cell_time(s, r):
        if not s:
            return "-"
        if not s["ok"]:
            return "FAIL"
        return "%.3f %s" % (s["time"], "(%.2f)" % r if r else "")

    def cell_rss(s, r):
        if not s:
            return "-"
        if not s["ok"]:
            return "FAIL"
        return "%.1f %s" % (s["rss"] / 1024, "(%.2f)" % r if r else "")

    lines = []
    hdr = "%-*s" % (wn, "workload") + "".join("%*s" % (colw, n) for n in names)
    for title, field, cell in (("elapsed time, s (ratio to %s)" % baseline, "time", cell_time),
                               ("peak RSS, MiB (ratio to %s)" % baseline, "rss", cell_rss)):
        lines.append("")
        lines.append("== median %s, %d round(s) ==" % (title, rounds))
        lines.append(hdr)
        for w in tw:
            lines.append("%-*s" % (wn, w["name"]) + "".join(
                "%*s" % (colw, cell(summ[(w["name"], a)], ratio(w["name"], a, field))) for a in names))
        lines.append("%-*s" % (wn, "geomean") + "".join(
            "%*s" % (colw, ("%.3f" % geo[(a, field)][0]) if geo[(a, field)][0] else "-") for a in names))
        lines.append("%-*s" % (wn, "  cases") + "".join(
            "%*s" % (colw, "%d/%d%s" % (geo[(a, field)][1], geo[(a, field)][2],
                                        " %dF" % nfail[a] if nfail[a] else "")) for a in names))
        left_out = [w["name"] for w in tw if field not in w.get("geo", ("time", "rss"))]
        if left_out:
            lines.append("(not in this geomean: %s)" % ", ".join(left_out))
    # latency
    lat = {}
    for a in names:
        s = summ.get(("wcet", a))
        if s and s["ok"]:
            lat[a] = {op: [s["metrics"].get("%s_%s" % (op, p), 0) for p in PCTS] for op in ("malloc", "free")}
    if any(w["name"] == "wcet" for w in ws):
        lines.append("")
        lines.append("== wcet tail latency, cycles (median over rounds; * = fewer samples than the percentile needs) ==")
        lines.append("%-*s" % (wn, "alloc/op") + "".join("%10s" % p for p in PCTS))
        for a in names:
            for op in ("malloc", "free"):
                if a in lat:
                    ns = summ[("wcet", a)]["metrics"].get(op + "_samples", 0)
                    lines.append("%-*s" % (wn, "%s %s" % (a, op)) + "".join(
                        "%10s" % ("%d%s" % (v, "*" if ns * (1 - PCT_VALUES[i] / 100) < 1 else ""))
                        for i, v in enumerate(lat[a][op])))
                else:
                    s = summ.get(("wcet", a))
                    lines.append("%-*s FAIL%s" % (wn, "%s %s" % (a, op), (": " + s["reason"]) if s else ""))
    if any(w["name"] == "wcet_test" for w in ws):
        lines += wcet_test_table(names, summ)
    wsa = [a["name"] for a in allocs if a.get("wcetstat")]
    if wsa:
        lines += wcetstat_table(tw, wsa, summ)
    # selected metrics
    mrows = [("micro-st", "ns_per_pair", "micro-st ns/pair"), ("micro-mt", "ns_per_pair", "micro-mt ns/pair")]
    mrows += [(w["name"], "mops_per_s", "%s Mops/s" % w["name"]) for w in ws if w["group"] == "scaling"]
    mrows += [("redis", "rps_get", "redis GET req/s"), ("redis", "rps_set", "redis SET req/s")]
    mrows += [("memcached", "ops_per_s", "memcached ops/s")]
    mrows += [("cache-scratch1", "shared_pct", "cache-scratch1 shared_pct")]
    mrows += [("purge-%s" % ph, "%s_%s_pct" % (ph, when), "purge-%s %s %%" % (ph, label))
              for ph in ("small", "large") for when, label in (("idle", "idle"), ("trim", "trimmed"))]
    mrows = [m for m in mrows if any(w["name"] == m[0] for w in ws)]
    if mrows:
        lines.append("")
        lines.append("== workload metrics (median) ==")
        lines.append("%-*s" % (wn + 6, "metric") + "".join("%*s" % (colw, n) for n in names))
        for wname, key, label in mrows:
            cells = []
            for a in names:
                s = summ[(wname, a)]
                if not s:
                    cells.append("-")
                elif not s["ok"]:
                    cells.append("FAIL")
                else:
                    v = s["metrics"].get(key)
                    cells.append("-" if v is None else ("%.1f" % v if v < 1000 else "%.0f" % v))
            lines.append("%-*s" % (wn + 6, label) + "".join("%*s" % (colw, c) for c in cells))
    if any(w["name"] == "release" for w in ws):
        lines += release_table(names, summ, wn)
    fails = [(w["name"], a, summ[(w["name"], a)]["reason"]) for w in tw for a in names
             if summ[(w["name"], a)] and not summ[(w["name"], a)]["ok"]]
    if fails:
        lines.append("")
        lines.append("== failures ==")
        for w, a, why in fails:
            lines.append("FAIL %s/%s: %s" % (w, a, why))
            note = known_fail_note(w, a, why)
            if note:
                lines.append("    known: " + note)
    if ap:
        lines.append("")
        lines.append("== against the best peer (fastest: %s, leanest: %s) ==" % (ap["fastest"], ap["leanest"]))
        for i in ap["insts"]:
            sm = ap["summary"][i]
            lines.append("%s: geomean time %s x the fastest peer's, RSS %s x glibc's; at or under the best peer's time "
                         "on %d of %d; behind: %s" % (
                             i, "%.3f" % sm["time_vs_fastest"][0] if sm["time_vs_fastest"][0] else "-",
                             "%.3f" % sm["rss_vs_glibc"][0] if sm["rss_vs_glibc"][0] else "-",
                             sm["measured"] - len(sm["behind"]), sm["measured"],
                             ", ".join("%s %.2f" % (w, r) for r, w, _ in sm["behind"]) or "none"))
    print("\n".join(lines))

    # ---- files
    resdir = ENV.get("RESULTS_DIR") or os.path.join(ROOT, "bench", "results")
    stamp = datetime.datetime.now().strftime("%Y-%m-%d-%H%M%S")
    outdir = os.path.join(resdir, stamp)
    os.makedirs(outdir, exist_ok=True)
    info = info or machine_info()
    with open(os.path.join(outdir, "runs.csv"), "w", newline="") as f:
        cw = csv.writer(f)
        cw.writerow(["round", "workload", "allocator", "ok", "elapsed_s", "peak_rss_kib", "reason", "metrics"])
        for w in ws:
            for a in names:
                for r in data.get((w["name"], a), []):
                    cw.writerow([r["round"], w["name"], a, int(r["ok"]), "%.6f" % r["time"], r["rss_kib"], r["reason"],
                                 json.dumps(r["metrics"], sort_keys=True)])
    with open(os.path.join(outdir, "summary.csv"), "w", newline="") as f:
        cw = csv.writer(f)
        cw.writerow(["workload", "allocator", "status", "rounds", "time_median_s", "time_min_s", "time_max_s",
                     "time_ratio", "rss_median_kib", "rss_min_kib", "rss_max_kib", "rss_ratio"])
        for w in tw:
            for a in names:
                s = summ[(w["name"], a)]
                if not s:
                    continue
                if not s["ok"]:
                    cw.writerow([w["name"], a, "FAIL: " + s["reason"], s["n"]] + [""] * 8)
                    continue
                rt, rr = ratio(w["name"], a, "time"), ratio(w["name"], a, "rss")
                cw.writerow([w["name"], a, "ok", s["n"], "%.6f" % s["time"], "%.6f" % s["tmin"], "%.6f" % s["tmax"],
                             "%.4f" % rt if rt else "", s["rss"], s["rmin"], s["rmax"], "%.4f" % rr if rr else ""])
    js = {"machine": info, "config": {"quick": QUICK, "rounds": rounds, "baseline": baseline, "timeout_s": timeout,
                                      "allocators": allocs, "workloads": ws, "wall_s": wall},
          "summary": {"%s/%s" % k: v for k, v in summ.items()},
          "geomean": {a: {"time": geo[(a, "time")][0], "rss": geo[(a, "rss")][0], "cases": geo[(a, "time")][1],
                          "failures": nfail[a]} for a in names},
          "runs": {"%s/%s" % k: v for k, v in data.items()}}
    if ap:
        js["against_peers"] = {"fastest": ap["fastest"], "leanest": ap["leanest"], "summary": ap["summary"]}
    with open(os.path.join(outdir, "results.json"), "w") as f:
        json.dump(js, f, indent=1, sort_keys=True)

    chart_errs = []
    trows = [(w["name"], [ratio(w["name"], a, "time") for a in names]) for w in tw]
    rrows = [(w["name"], [ratio(w["name"], a, "rss") for a in names]) for w in tw]
    e = bar_chart(outdir, "time.svg", "Elapsed time relative to %s (lower is better; missing = FAIL)" % baseline,
                  "time / %s" % baseline, names, trows)
    e and chart_errs.append("time.svg: " + e)
    e = bar_chart(outdir, "rss.svg", "Peak RSS relative to %s (lower is better; missing = FAIL)" % baseline,
                  "peak RSS / %s" % baseline, names, rrows)
    e and chart_errs.append("rss.svg: " + e)
    if lat:
        e = latency_chart(outdir, "latency.svg", names, lat)
        e and chart_errs.append("latency.svg: " + e)

    md = []
    md.append("# sunmao benchmark report — %s" % stamp)
    md.append("")
    md.append("## Machine")
    md.append("")
    md.append("| | |\n|---|---|")
    md.append("| CPU | %s |" % info["cpu"])
    md.append("| hardware threads | %d |" % info["cores"])
    md.append("| memory | %s |" % info["memory"])
    md.append("| OS / kernel | %s / %s |" % (info["os"], info["kernel"]))
    md.append("| gcc | %s |" % info["gcc"])
    md.append("| sunmao commit | %s |" % (info["git"] or "?"))
    for p, v in info["packages"].items():
        md.append("| %s | %s |" % (p, v))
    md.append("")
    md.append("## Method")
    md.append("")
    md.append("- %s mode, %d round(s); in every round each workload runs once per allocator, allocators interleaved "
              "(round-robin, the starting allocator rotates between rounds). Wall time of the run: %s." %
              ("QUICK" if QUICK else "full", rounds, fmt_dur(wall)))
    md.append("- Elapsed time = wall clock of the measured process; peak RSS = `ru_maxrss` from `wait4()` "
              "(redis, memcached: `VmHWM` of the server before shutdown; the time is the client's, redis-benchmark's or "
              "memcl's, elapsed time).")
    md.append("- Cells: median [min–max] over rounds, and the ratio to **%s** (the baseline). Geometric means are over "
              "the workloads where both the allocator and the baseline succeeded (count shown). "
              "Any failed run (crash, wrong output, timeout after %d s) makes the cell FAIL." % (baseline, timeout))
    def shown_path(path):  # reports get committed as snapshots: no paths of this machine in them
        rel = os.path.relpath(path, ROOT)
        return path if rel.startswith("..") else rel
    md.append("- Allocators: " + ", ".join("`%s`%s" % (a["name"], " (`%s`)" % shown_path(a["preload"]) if a["preload"] else " (no preload)")
                                          for a in allocs))
    for k, v in problems_note(allocs).items():
        md.append("- %s: %s" % (k, v))
    md.append("")
    for title, field, unit, scale in (("Elapsed time", "time", "s", 1.0), ("Peak RSS", "rss", "MiB", 1 / 1024)):
        md.append("## %s (%s)" % (title, unit))
        md.append("")
        md.append("| workload | " + " | ".join(names) + " |")
        md.append("|---|" + "---:|" * len(names))
        for w in tw:
            cells = []
            for a in names:
                s = summ[(w["name"], a)]
                if not s:
                    cells.append("–")
                elif not s["ok"]:
                    cells.append("**FAIL** (%s)" % s["reason"].replace("|", "/"))
                else:
                    lo, hi = (s["tmin"], s["tmax"]) if field == "time" else (s["rmin"] * scale, s["rmax"] * scale)
                    v = s[field] * scale
                    r = ratio(w["name"], a, field)
                    fmtv = "%.3f" if field == "time" else "%.1f"
                    cells.append((fmtv + " [" + fmtv + "–" + fmtv + "]") % (v, lo, hi) + (" ×%.2f" % r if r else ""))
            md.append("| %s | " % w["name"] + " | ".join(cells) + " |")
        md.append("| **geomean vs %s** | " % baseline + " | ".join(
            ("**%.3f** (%d/%d)" % (geo[(a, field)][0], geo[(a, field)][1], geo[(a, field)][2]))
            if geo[(a, field)][0] else "–" for a in names) + " |")
        md.append("")
        left_out = [w["name"] for w in tw if field not in w.get("geo", ("time", "rss"))]
        if left_out:
            md.append("Not in this geomean: %s." % ", ".join(left_out))
            md.append("")
        md.append("![%s](%s/%s.svg)" % (title, stamp, field))
        md.append("")
    if ap:
        md += against_peers_md(ap)
    notes = [(w, a, known_fail_note(w, a, why)) for w, a, why in fails]
    notes = [n for n in notes if n[2]]
    if notes:
        md.append("## Known failures")
        md.append("")
        for w, a, note in notes:
            md.append("- %s FAILs %s: %s" % (a, w, note))
        md.append("")
    if any(w["name"] == "wcet" for w in ws):
        md.append("## Tail latency (wcet, cycles)")
        md.append("")
        md.append("%d pinned threads, asymmetric batches, shuffled remote frees, sizes 16..2048, one call in 8 timed "
                  "with rdtsc; median of the per-round percentiles." % NCPU)
        md.append("")
        md.append("A percentile p needs at least 1/(1-p) samples to differ from the maximum; values marked * come "
                  "from fewer samples than that (run the full suite for p99.9999).")
        md.append("")
        md.append("| allocator | op | " + " | ".join(PCTS) + " | samples |")
        md.append("|---|---|" + "---:|" * (len(PCTS) + 1))
        for a in names:
            s = summ.get(("wcet", a))
            for op in ("malloc", "free"):
                if a in lat:
                    ns = s["metrics"].get(op + "_samples", 0)
                    md.append("| %s | %s | " % (a, op) + " | ".join(
                        "%d%s" % (v, "*" if ns * (1 - PCT_VALUES[i] / 100) < 1 else "") for i, v in enumerate(lat[a][op])) +
                              " | %d |" % s["metrics"].get(op + "_samples", 0))
                else:
                    md.append("| %s | %s | **FAIL** %s |" % (a, op, s["reason"] if s else ""))
        md.append("")
        if lat:
            md.append("![latency](%s/latency.svg)" % stamp)
            md.append("")
    if any(w["name"] == "wcet_test" for w in ws):
        md += wcet_test_md(names, summ)
    if wsa:
        md += wcetstat_md(tw, wsa, summ)
    if mrows:
        md.append("## Workload metrics (median)")
        md.append("")
        md.append("| metric | " + " | ".join(names) + " |")
        md.append("|---|" + "---:|" * len(names))
        for wname, key, label in mrows:
            cells = []
            for a in names:
                s = summ[(wname, a)]
                cells.append("–" if not s else "FAIL" if not s["ok"] else
                             ("%.1f" % s["metrics"][key] if key in s["metrics"] else "–"))
            md.append("| %s | " % label + " | ".join(cells) + " |")
        md.append("")
    if any(w["name"] == "release" for w in ws):
        md += release_md(names, summ)
    md.append("## Workloads")
    md.append("")
    for w in ws:
        p = w["quick"] if QUICK else w["full"]
        nruns = sum(runs_in_round(w, rounds, r) for r in range(rounds))
        md.append("- **%s** (%s): %s — `%s`%s" % (w["name"], w["group"], w["desc"],
                                                 " ".join(p) if isinstance(p, list) else json.dumps(p),
                                                 " (%d runs per allocator)" % nruns if nruns != rounds else ""))
    md.append("")
    if chart_errs:
        md.append("Chart errors: " + "; ".join(chart_errs))
        md.append("")
    md.append("Raw data: [`runs.csv`](%s/runs.csv), [`summary.csv`](%s/summary.csv), "
              "[`results.json`](%s/results.json)." % (stamp, stamp, stamp))
    mdpath = os.path.join(resdir, stamp + ".md")
    with open(mdpath, "w") as f:
        f.write("\n".join(md) + "\n")
    print("")
    if chart_errs:
        print("bench: chart errors: " + "; ".join(chart_errs))
    print("bench: report %s (charts and raw data in %s/), wall time %s" % (os.path.relpath(mdpath), os.path.relpath(outdir),
                                                                          fmt_dur(wall)))
    return len(fails)


WT_PCTS = ["p99", "p99.9", "p99.99", "p99.999", "p99.9999"]


def fmt_us(ns):
    us = ns / 1000.0
    return "%.3f" % us if us < 1 else "%.2f" % us if us < 10 else "%.1f" % us if us < 1000 else "%.0f" % us


def wcet_test_cells(names, summ):
    """{alloc: {op: [(mean, lo, hi, resolved) per WT_PCTS]}} for the allocators whose wcet_test runs all
    succeeded, and {op: the allocator with the lowest mean p99.9999}."""
    cells, best = {}, {}
    for a in names:
        s = summ.get(("wcet_test", a))
        if not (s and s["ok"]):
            continue
        cells[a] = {}
        for op in ("malloc", "free"):
            n = s["mmean"].get(op + "_samples", 0)
            row = []
            for p in WT_PCTS:
                k = "%s_%s" % (op, p)
                if k not in s["mmean"]:
                    row.append(None)
                    continue
                lo, hi = s["mrange"][k]
                row.append((s["mmean"][k], lo, hi, n * (1 - float(p[1:]) / 100) >= 1))
            cells[a][op] = row
    for op in ("malloc", "free"):
        have = [(c[op][-1][0], a) for a, c in cells.items() if c[op][-1]]
        if have:
            best[op] = min(have)[1]
    return cells, best


def wcet_test_table(names, summ):
    """Terminal: per operation, one row per allocator: the mean over the runs of p99 .. p99.9999 (µs)
    and [min-max]."""
    cells, best = wcet_test_cells(names, summ)
    an = max(12, max(len(a) for a in names) + 2)
    cw = 22
    lines = ["", "== wcet_test tail latency, us: mean over the runs [min-max]; * = lowest p99.9999 per operation; "
                 "? = fewer samples than the percentile needs =="]
    for op in ("malloc", "free"):
        lines.append("%-*s%5s" % (an, op, "runs") + "".join("%*s" % (cw, p) for p in WT_PCTS))
        for a in names:
            s = summ.get(("wcet_test", a))
            if not s:
                continue
            if a not in cells:
                lines.append("%-*s%5d  FAIL: %s" % (an, a, s["n"], s["reason"]))
                continue
            row = []
            for i, c in enumerate(cells[a][op]):
                if not c:
                    row.append("-")
                    continue
                mean, lo, hi, resolved = c
                mark = ("*" if i == len(WT_PCTS) - 1 and best.get(op) == a else "") + ("" if resolved else "?")
                row.append("%s%s [%s-%s]" % (fmt_us(mean), mark, fmt_us(lo), fmt_us(hi)))
            lines.append("%-*s%5d" % (an, a, s["n"]) + "".join("%*s" % (cw, c) for c in row))
    return lines


def wcet_test_md(names, summ):
    cells, best = wcet_test_cells(names, summ)
    md = ["## Tail latency (wcet_test, µs)", "",
          "The Mortise paper's wcet_test (§4.2): %d threads, one per hardware thread, each pinned to its CPU; each "
          "performs a fixed number of operations in eight groups, one size class per group (16 .. 2048 B); in a "
          "round every thread allocates an asymmetric batch (thread t: (T-t)/T of 8 MiB live, scaled to the "
          "operation count), and the round's objects are shuffled and freed by the other threads; every block is "
          "filled with a pattern and checked before it is freed. One malloc and one free in 8 are timed with the "
          "cycle counter (lfence-fenced rdtsc, calibrated against CLOCK_MONOTONIC); the timer's own cost (about "
          "20 ns) is included. Cells: the mean over the runs of each run's percentile [min–max]; **bold**: the "
          "lowest p99.9999 per operation; ? marks a percentile with fewer samples per run than it needs "
          "(1/(1-p))." % NCPU, ""]
    md.append("| allocator | runs | " + " | ".join("malloc " + p for p in WT_PCTS) + " | "
              + " | ".join("free " + p for p in WT_PCTS) + " |")
    md.append("|---|---:|" + "---:|" * (2 * len(WT_PCTS)))
    for a in names:
        s = summ.get(("wcet_test", a))
        if not s:
            continue
        if a not in cells:
            md.append("| %s | %d | **FAIL** (%s) |" % (a, s["n"], s["reason"].replace("|", "/"))
                      + " |" * (2 * len(WT_PCTS) - 1))
            continue
        row = []
        for op in ("malloc", "free"):
            for i, c in enumerate(cells[a][op]):
                if not c:
                    row.append("–")
                    continue
                mean, lo, hi, resolved = c
                v = fmt_us(mean) + ("" if resolved else "?")
                if i == len(WT_PCTS) - 1 and best.get(op) == a:
                    v = "**%s**" % v
                row.append("%s [%s–%s]" % (v, fmt_us(lo), fmt_us(hi)))
        md.append("| %s | %d | " % (a, s["n"]) + " | ".join(row) + " |")
    md.append("")
    return md


WS_COLS = ["p90", "p99", "p99.9", "p99.99", "p99.999", "p99.9999", "max"]


def fmt_ws(v):
    return "cap" if v == float("inf") else "%.0f" % v


def wcetstat_rows(tw, wsa, summ):
    """[(workload, alloc, op, samples, [values], resolved flags) or (workload, alloc, None, reason)]"""
    rows = []
    for w in tw:
        for a in wsa:
            s = summ.get((w["name"], a))
            if not s:
                continue
            if not s["ok"]:
                rows.append((w["name"], a, None, s["reason"]))
                continue
            m = s["metrics"]
            for op in ("malloc", "free"):
                n = m.get("ws_%s_samples" % op, 0)
                vals = [m.get("ws_%s_%s" % (op, c)) for c in WS_COLS]
                res = [c == "max" or n * (1 - float(c[1:]) / 100) >= 1 for c in WS_COLS]
                rows.append((w["name"], a, op, n, vals, res))
    return rows


def wcetstat_table(tw, wsa, summ):
    lines = ["", "== wcet_stat in the program (libwcetstat.so in front of the allocator), ns, median over the runs; "
                 "bucket tops; includes malloc_heap's 16-byte header; * = fewer samples than needed =="]
    wn = max(14, max(len(w["name"]) for w in tw) + 1)
    an = max(12, max(len(a) for a in wsa) + 1)
    lines.append("%-*s%-*s%-7s%10s" % (wn, "workload", an, "allocator", "op", "samples")
                 + "".join("%10s" % c for c in WS_COLS))
    for r in wcetstat_rows(tw, wsa, summ):
        if r[2] is None:
            lines.append("%-*s%-*sFAIL: %s" % (wn, r[0], an, r[1], r[3]))
            continue
        w, a, op, n, vals, res = r
        lines.append("%-*s%-*s%-7s%10d" % (wn, w, an, a, op, n) + "".join(
            "%10s" % ("-" if v is None else fmt_ws(v) + ("" if ok else "*")) for v, ok in zip(vals, res)))
    return lines


def wcetstat_md(tw, wsa, summ):
    md = ["## wcet_stat inside the programs (ns)", "",
          "`wcetstat+<alloc>` runs preload `bench/lib/wcetstat.c`'s `libwcetstat.so` in front of the allocator "
          "(malloc_heap over the next malloc in the process :: wcet_stat :: malloc_socket): one malloc and one "
          "free in 8 per thread timed inside the program, including malloc_heap's 16-byte header per block; "
          "values are the histogram's bucket tops (at most 12.5% high), medians over the runs; * = fewer samples "
          "than the percentile needs; cap = above 2^23 cycles.", ""]
    md.append("| workload | allocator | op | samples | " + " | ".join(WS_COLS) + " |")
    md.append("|---|---|---|---:|" + "---:|" * len(WS_COLS))
    for r in wcetstat_rows(tw, wsa, summ):
        if r[2] is None:
            md.append("| %s | %s | | **FAIL** (%s) |" % (r[0], r[1], r[3].replace("|", "/")) + " |" * len(WS_COLS))
            continue
        w, a, op, n, vals, res = r
        md.append("| %s | %s | %s | %d | " % (w, a, op, n) + " | ".join(
            "–" if v is None else fmt_ws(v) + ("" if ok else "*") for v, ok in zip(vals, res)) + " |")
    md.append("")
    return md


RELEASE_PHASES = ("small", "medium", "large")
RELEASE_SAMPLES = (("0s", "0 s"), ("100ms", "0.1 s"), ("500ms", "0.5 s"), ("1s", "1 s"), ("2s", "2 s"))


def release_table(names, summ, wn):
    """Terminal table of the release workload: one row per allocator; per phase the RSS when it
    began, with every block live, and right after / 1 s after the last free (MiB, medians)."""
    cols = (("base", "base"), ("peak", "peak"), ("rss_0s", "0s"), ("rss_1s", "1s"))
    cw = 7
    grp = len(cols) * cw
    lines = ["", "== release: RSS around the frees, MiB (median; base = when the phase began, peak = all blocks "
                 "live, 0s / 1s = right after / 1 s after the last free) =="]
    lines.append("%-*s" % (wn, "") + "".join("  " + (" %s " % ph).center(grp, "-") for ph in RELEASE_PHASES))
    lines.append("%-*s" % (wn, "allocator") + "".join("  " + "".join("%*s" % (cw, h) for _, h in cols)
                                                      for _ in RELEASE_PHASES))
    for a in names:
        s = summ.get(("release", a))
        if not s:
            continue
        if not s["ok"]:
            lines.append("%-*s  FAIL: %s" % (wn, a, s["reason"]))
            continue
        m = s["metrics"]
        cells = []
        for ph in RELEASE_PHASES:
            cells.append("  " + "".join("%*s" % (cw, "%.1f" % m[k] if k in m else "-")
                                        for k in ("%s_%s_mib" % (ph, c) for c, _ in cols)))
        lines.append("%-*s" % (wn, a) + "".join(cells))
    return lines


def release_md(names, summ):
    """Markdown: the RSS 1 s after the frees per allocator and phase (median [min–max]), then the
    whole course (medians)."""
    md = ["## Memory given back (release)", "",
          "Each phase allocates, touches every page, verifies and frees everything, then the program stays alive "
          "doing only a few small malloc/free calls (no `malloc_trim`); RSS from `/proc/self/statm`. Cells: RSS when "
          "the phase began → with every block live → **1 s after the last free** [min–max over rounds], MiB. "
          "RSS is the whole process's, so what an earlier phase kept shows in the later phases' figures.", ""]
    md.append("| allocator | " + " | ".join(RELEASE_PHASES) + " |")
    md.append("|---|" + "---:|" * len(RELEASE_PHASES))
    rows = []
    for a in names:
        s = summ.get(("release", a))
        if not s:
            continue
        if not s["ok"]:
            md.append("| %s | **FAIL** (%s) |" % (a, s["reason"].replace("|", "/")) + " |" * (len(RELEASE_PHASES) - 1))
            continue
        m, mr = s["metrics"], s.get("mrange", {})
        cells = []
        for ph in RELEASE_PHASES:
            k = "%s_rss_1s_mib" % ph
            if k not in m:
                cells.append("–")
                continue
            lo, hi = mr.get(k, (m[k], m[k]))
            cells.append("%.1f → %.1f → **%.1f** [%.1f–%.1f]" % (m.get(ph + "_base_mib", 0), m.get(ph + "_peak_mib", 0),
                                                                m[k], lo, hi))
        md.append("| %s | " % a + " | ".join(cells) + " |")
        rows.append((a, m))
    md.append("")
    if rows:
        md.append("The whole course (medians, MiB; time after the last free):")
        md.append("")
        md.append("| allocator | phase | base | peak | " + " | ".join(l for _, l in RELEASE_SAMPLES) + " |")
        md.append("|---|---|" + "---:|" * (2 + len(RELEASE_SAMPLES)))
        for a, m in rows:
            for ph in RELEASE_PHASES:
                vals = [m.get("%s_%s_mib" % (ph, k)) for k in ["base", "peak"] + ["rss_" + x for x, _ in RELEASE_SAMPLES]]
                md.append("| %s | %s | " % (a, ph) + " | ".join("–" if v is None else "%.1f" % v for v in vals) + " |")
        md.append("")
    return md


def problems_note(allocs):
    _, problems = discover_allocators()
    return {k: v.split(":", 1)[1] for k, v in problems.items()}


USAGE = """usage: bench/harness.py [-h|--help]

The benchmark harness behind `make bench`: runs the workloads under the allocators (rounds
interleaved), prints progress and tables, and writes bench/results/<date>.md with charts and raw
data. Start it through bench/run.sh, which compiles the workload programs into $BENCH_BIN first
and turns its options into the variables below; run directly, it expects them built.

Environment (bench/run.sh --help has the meaning of each):
  BUILD, SM_ROOT          build directory (default build) and repository root
  BENCH_BIN               compiled workloads and smtime (default $BUILD/bench)
  INSTANCES               sunmao instances, each $BUILD/lib<name>.so
  ALLOCS, BENCH           allocators and workloads to run (default: all)
  BASELINE, ROUNDS, TIMEOUT, RESULTS_DIR
  QUICK, SMOKE, STRICT    1 to turn on
  REPORT_FROM             an earlier run's results.json: write its report again, run nothing
"""


def parse_args(argv):
    """Only -h/--help: the configuration comes in the environment (bench/run.sh)."""
    for a in argv:
        if a in ("-h", "--help"):
            sys.stdout.write(USAGE)
            sys.exit(0)
        if a.startswith("-"):
            sys.stderr.write("bench/harness.py: unknown option '%s' (see --help)\n" % a)
            sys.exit(2)
    if argv:
        sys.stderr.write("bench/harness.py: takes no arguments, got '%s' (see --help)\n" % " ".join(argv))
        sys.exit(2)


if __name__ == "__main__":
    parse_args(sys.argv[1:])
    sys.exit(main())
