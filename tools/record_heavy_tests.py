"""Write tests/heavy_tests.txt from a pytest ``--durations=0`` log: every test whose setup + call +
teardown took at least THRESHOLD seconds is marked ``heavy`` by tests/conftest.py, so that
``pytest -m "not heavy"`` (the fast tier) runs the rest.

    python -m pytest -q -n 2 --durations=0 tests > /tmp/suite.txt
    python tools/record_heavy_tests.py /tmp/suite.txt [--threshold 0.5]

The file lists one nodeid per line, slowest first, with its seconds as a comment; re-record it after
renaming tests or adding slow ones (a stale entry only stops marking, it never fails a run)."""
import argparse
import collections
import os
import re

LINE = re.compile(r"\s*([\d.]+)s (setup|call|teardown)\s+(\S+)")
OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "heavy_tests.txt")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("log")
    p.add_argument("--threshold", type=float, default=0.5)
    a = p.parse_args()
    total = collections.Counter()
    with open(a.log) as f:
        for line in f:
            m = LINE.match(line)
            if m:
                total[m.group(3)] += float(m.group(1))
    heavy = sorted(((s, n) for n, s in total.items() if s >= a.threshold), reverse=True)
    with open(OUT, "w") as f:
        f.write(f"# tests of {a.threshold:g} s or more in {os.path.basename(a.log)} (tools/record_heavy_tests.py); "
                f"{len(heavy)} of {len(total)} timed, {sum(s for s, _ in heavy):.0f} of {sum(total.values()):.0f} s\n")
        for s, n in heavy:
            f.write(f"{n}  # {s:.1f}\n")
    print(f"{len(heavy)} heavy tests -> {os.path.normpath(OUT)}")


if __name__ == "__main__":
    main()
