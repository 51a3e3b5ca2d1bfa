"""The kernel tests sit in one folder per kernel family (tests/kernels/<family>/, as ncudnn/kernels/); their
shared helpers (case_check, ptx_stats) here, and a test may import another family's test module: this
folder and every family folder go on sys.path, so any one file runs on its own."""
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
for _d in [_HERE] + sorted(os.path.join(_HERE, n) for n in os.listdir(_HERE)):
    if os.path.isdir(_d) and not os.path.basename(_d).startswith(("_", ".")) and _d not in sys.path:
        sys.path.insert(0, _d)
