"""Print the test files under the given paths, longest first: by the per-test times of an earlier GPU
run (.gpustate/times.txt, "seconds nodeid" lines, summed per file) where known, else by file size.

A file run as several processes prints one ``FILE@I/N`` line per shard (tests/conftest.py keeps every N-th
test from the I-th, counted after KEEP_DONE's deselection): N is SHARDS (default 1), or more for a file
whose known time exceeds SPLIT_S seconds (default 400; 0: never), one shard per SPLIT_S, 16 at most."""
import math
import os
import sys
from collections import defaultdict


def files_under(paths):
    for p in paths:
        if os.path.isfile(p):
            yield p
            continue
        for root, _, names in os.walk(p):
            for n in names:
                if n.startswith("test_") and n.endswith(".py"):
                    yield os.path.join(root, n)


def main(paths):
    known = defaultdict(float)
    try:
        with open(".gpustate/times.txt") as f:
            for line in f:
                sec, _, node = line.strip().partition(" ")
                known[node.split("::")[0]] += float(sec)
    except OSError:
        pass
    files = sorted(set(files_under(paths)))
    # a size-only file is guessed at 1 s per 1.5 KB when no time is known
    cost = {f: known.get(f, os.path.getsize(f) / 1500) for f in files}
    shards, split_s = int(os.environ.get("SHARDS") or 1), float(os.environ.get("SPLIT_S") or 400)
    for f in sorted(files, key=lambda f: -cost[f]):
        n = min(16, max(shards, math.ceil(cost[f] / split_s) if split_s > 0 else 1))
        for i in range(n):
            print(f if n == 1 else f"{f}@{i}/{n}")


if __name__ == "__main__":
    main(sys.argv[1:] or ["tests"])
