"""``python -m ncudnn.kernels show ENGINE KNOB=VALUE ...``: print the generated source of an engine config's
kernels (``show --list``: the engines and their knobs). The command lives in :mod:`ncudnn.kernel_show`, above
the engine layer: it builds plans, which the kernel layer itself never imports."""
import sys

from ..kernel_show import capture

capture.install()  # before any kernel factory runs, so every generated source is recorded

from ..kernel_show.cli import main  # noqa: E402

sys.exit(main())
