"""The ``ncudnn`` command (also ``python -m ncudnn``).

  ncudnn info [--json]   what this install is: versions, the cuDNN API level, the device, the engines
  ncudnn demo            the end-to-end demo: mnistCUDNN-style LeNet through the legacy API (ncudnn/demo.py)
  ncudnn bench [...]     benchmarks beside cuDNN / cuBLAS (ncudnn.bench_cli; needs the repository's bench/)
"""
import argparse
import json
import platform as _py_platform
from importlib import metadata


def _version(dist):
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _engines():
    """(names in global-index order, or None when the engine layer is absent; error text or None)."""
    try:
        from .engines import registry
    except ModuleNotFoundError as e:
        if e.name not in ("ncudnn.engines", "ncudnn.engines.registry"):
            raise
        return None, None
    try:
        return [(e.global_index, e.name) for e in registry.engines()], None
    except Exception as e:  # an engine module that fails to import must not hide the rest of `info`
        return [], f"{type(e).__name__}: {e}"


def collect_info():
    """Everything `ncudnn info` prints, as a dict."""
    from . import version
    from .handle import device_info
    from .errors import CudnnError

    try:
        dev = device_info()
        dev_err = None
    except CudnnError as e:
        dev, dev_err = None, e.message
    engines, engine_err = _engines()
    return {
        "ncudnn": version.__version__,
        "cudnn_api_level": version.CUDNN_VERSION,
        "cudnn_api": f"{version.CUDNN_MAJOR}.{version.CUDNN_MINOR}.{version.CUDNN_PATCHLEVEL}",
        "device": dev,
        "device_error": dev_err,
        "python": _py_platform.python_version(),
        "packages": {name: _version(name) for name in
                     ("numba", "numba-cuda", "cuda-python", "cuda-bindings", "numpy", "ml_dtypes")},
        "engines": engines,
        "engines_error": engine_err,
    }


def format_info(info):
    lines = [f"ncudnn {info['ncudnn']}: cuDNN API level {info['cudnn_api_level']} ({info['cudnn_api']})"]
    dev = info["device"]
    if dev is None:
        lines.append(f"device: none usable ({info['device_error']})")
    elif dev["simulator"]:
        lines.append("device: CUDA simulator (NUMBA_ENABLE_CUDASIM=1: kernels run on the CPU, tiny shapes)")
    else:
        cc = dev["compute_capability"]
        lines.append(f"device: {dev['name']}, compute capability {cc[0]}.{cc[1]} (sm_{cc[0]}{cc[1]}), "
                     f"{dev['sm_count']} SMs")
    pk = info["packages"]
    lines.append(f"python {info['python']}; " + ", ".join(f"{k} {v or 'not installed'}" for k, v in pk.items()))
    if info["engines"] is None:
        lines.append("engines: none registered yet")
    else:
        lines.append(f"engines: {len(info['engines'])} registered")
        lines += [f"  [{i}] {name}" for i, name in info["engines"]]
        if info["engines_error"]:
            lines.append(f"  (loading engines failed: {info['engines_error']})")
    return "\n".join(lines)


def cmd_info(args):
    info = collect_info()
    print(json.dumps(info, default=list) if args.json else format_info(info))
    return 0


def cmd_demo(args):
    """The mnistCUDNN-style demo (ncudnn/demo.py): exit 0 PASS, 1 FAIL, 2 a missing engine or device.
    With ``args.train`` (a ``--train`` flag, when the parser has one): train and evaluate a LeNet on the
    8x8 digits instead."""
    from . import demo

    if getattr(args, "train", False):
        return demo.train()
    return demo.run()


def cmd_bench(args):
    from .bench_cli import argv_of, main as bench_main

    return bench_main(argv_of(args))


def build_parser():
    ap = argparse.ArgumentParser(prog="ncudnn", description="cuDNN rebuilt in Python with numba.cuda kernels.")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND")
    p = sub.add_parser("info", help="versions, cuDNN API level, device and registered engines",
                       description="Show the ncudnn version, the cuDNN API level it implements, the device "
                                   "(or the CUDA simulator), library versions and the registered engines.")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_info)
    p = sub.add_parser("demo", help="the end-to-end demo: mnistCUDNN-style LeNet through the legacy API",
                       description="Run a mnistCUDNN-style LeNet through the legacy API, every layer checked "
                                   "against the NumPy oracle. Exit status 0 PASS, 1 FAIL, 2 an engine or "
                                   "device is missing.")
    p.add_argument("--train", action="store_true",
                   help="train the LeNet on scikit-learn's 8x8 digits (pip install 'ncudnn[demo]') through the legacy "
                        "API and report the test accuracy (PASS at >= 95%% on a GPU; on the simulator a reduced run "
                        "whose loss must drop, with no accuracy)")
    p.set_defaults(func=cmd_demo)
    p = sub.add_parser("bench", help="benchmarks beside cuDNN / cuBLAS (results under ./bench-results/ or --out)",
                       description="Time ncudnn beside cuDNN (through torch and cudnn-frontend) and cuBLAS on "
                                   "published shape sets; write JSON, a markdown table and charts.")
    from .bench_cli import build_parser as _bench_parser
    _bench_parser(p)
    p.set_defaults(func=cmd_bench)
    return ap


def main(argv=None):
    ap = build_parser()
    args = ap.parse_args(argv)
    if args.command is None:
        ap.print_help()
        return 0
    return args.func(args)
