"""Run many cases: in this process, or in ``jobs`` worker processes (each its own CUDA context) until a
deadline. Cases go in blocks of :data:`.spec.VARIANTS` (block ``b``: cases ``VARIANTS * b ..``), all of
one family, :func:`family_of` (``b`` modulo the number of families, shifted by one each round, so the first
blocks of a run already cover every family); worker ``j`` runs blocks ``j, j + jobs, ...``, each block's cases in a row (a variant
family's block shares one structure: its kernels compile once, in that worker), and appends one JSON
line per case to ``DIR/worker-j.jsonl``. A worker whose CUDA
context failed exits with status 3 and is started again after its last case (the faulting case is
recorded as an error first)."""
import gzip
import json
import os
import subprocess
import sys
import time

from .runner import ContextLost, repro, run_case
from .spec import VARIANTS

CONTEXT_LOST = 3


def family_of(c, families):
    """The family of case ``c``: its block's number modulo the number of families, so any ``len(families)``
    consecutive blocks cover every family (worker ``j`` of ``jobs`` runs blocks ``j, j + jobs, ...``: with
    ``jobs`` and ``len(families)`` coprime it cycles through all of them; otherwise the blocks' rounds shift
    it by one family). A multiplicative hash of small block numbers left five of thirteen families with
    no graph in a 16-worker run of eight blocks per worker."""
    b, n = c // VARIANTS, len(families)
    return families[(b + b // n) % n]


def cases_of(j, jobs, cases):
    """Worker ``j``'s cases, in order: the blocks ``j, j + jobs, ...`` below ``cases``."""
    for b in range(j, -(-cases // VARIANTS), jobs):
        yield from range(b * VARIANTS, min(cases, (b + 1) * VARIANTS))


def _done(path):
    if not os.path.exists(path):
        return set()
    out = set()
    with open(path) as f:
        for line in f:
            try:
                out.add(json.loads(line)["case"])
            except (ValueError, KeyError):
                continue
    return out


def worker(j, jobs, seed, cases, families, out, deadline, draws, max_plans):
    """Worker ``j``: run its cases until ``deadline`` (epoch seconds) or the last case."""
    path = os.path.join(out, f"worker-{j}.jsonl")
    done = _done(path)
    with open(path, "a") as f:
        for c in cases_of(j, jobs, cases):
            if time.time() >= deadline:
                break
            if c in done:
                continue
            fam = family_of(c, families)
            try:
                res = run_case(fam, seed, c, draws=draws, max_plans=max_plans, deadline=deadline)
            except ContextLost as e:
                res = {"family": fam, "seed": seed, "case": c, "outcome": "error", "plans": [], "executions": 0,
                       "failures": [{"kind": "error", "what": f"CUDA context lost: {e}"[:400],
                                     "repro": repro(fam, seed, c)}]}
                f.write(json.dumps(res) + "\n")
                f.flush()
                return CONTEXT_LOST
            f.write(json.dumps(res) + "\n")
            f.flush()
    return 0


def run_local(seed, cases, families, draws=2, max_plans=None, deadline=None, on_result=None):
    """Run cases 0..cases-1 in this process (until ``deadline``); returns the result dicts."""
    out = []
    for c in range(cases):
        if deadline is not None and time.time() >= deadline:
            break
        r = run_case(family_of(c, families), seed, c, draws=draws, max_plans=max_plans, deadline=deadline)
        out.append(r)
        if on_result is not None:
            on_result(r)
    return out


def run_pool(seed, cases, families, jobs, out, seconds, draws, max_plans, restarts=50, grace=45):
    """``jobs`` worker processes to ``seconds`` from now; returns the result dicts of every worker. A worker
    still inside a case ``grace`` seconds after the deadline is killed (its finished cases are on disk; the
    unfinished case is not counted)."""
    os.makedirs(out, exist_ok=True)
    deadline = time.time() + seconds
    base = [sys.executable, "-m", "ncudnn.fuzz", "--seed", str(seed), "--cases", str(cases), "--families",
            ",".join(families), "--jobs", str(jobs), "--out", out, "--deadline", repr(deadline), "--draws",
            str(draws)] + (["--max-plans", str(max_plans)] if max_plans else [])
    procs = {}

    def start(j):
        log = open(os.path.join(out, f"worker-{j}.log"), "a")
        procs[j] = subprocess.Popen(base + ["--worker", str(j)], stdout=log, stderr=subprocess.STDOUT)

    for j in range(jobs):
        start(j)
    while procs:
        time.sleep(0.5)
        late = time.time() > deadline + grace
        for j, p in list(procs.items()):
            if late and p.poll() is None:
                p.kill()
                p.wait()
            rc = p.poll()
            if rc is None:
                continue
            del procs[j]
            if rc == CONTEXT_LOST and time.time() < deadline - 5 and restarts > 0:
                restarts -= 1
                start(j)
    return load(out)


def load(out):
    """Every case result under ``out`` (worker-*.jsonl, gzipped or not)."""
    res = []
    for name in sorted(os.listdir(out)):
        if name.startswith("worker-") and name.endswith((".jsonl", ".jsonl.gz")):
            opener = gzip.open if name.endswith(".gz") else open
            with opener(os.path.join(out, name), "rt") as f:
                for line in f:
                    try:
                        res.append(json.loads(line))
                    except ValueError:
                        continue
    return res
