"""The GPU-free compile check: every registered kernel compiled for sm_90, its resources checked.

Each kernel family registers its cases in its own ``ncudnn/kernels/<family>/cases.py`` (kernels must be lazily
compiled: no signature in @cuda.jit)::

    register_compile_case("gemm_f32_128x128", kernel, "void(float32[:, :], float32[:, :], ...)",
                          max_registers=128, max_local_bytes=0)

Only the compile check imports those modules (:func:`load_cases`, called when cases are listed or run): importing a
kernel module registers and builds nothing. A case stays credited to the module its kernel comes from.

:func:`compile_case` compiles a case to PTX with numba (NVVM), then links the PTX into an sm_90 cubin with
nvJitLink, whose ``-verbose`` info log gives registers, spill stores / loads and the stack frame: a case
passes with no spills, registers within ``max_registers`` and a stack frame within ``max_local_bytes``.
Where no cubin can be made, the PTX's ``.local`` depots are held to ``max_local_bytes`` instead.
A dispatcher's own options (fastmath, launch_bounds, max_registers as -maxrregcount) are honoured.

Numba cannot compile in the simulator, so there :func:`run_compile_check` runs the check in a
subprocess with NUMBA_ENABLE_CUDASIM=0 that imports the cases' modules (or files) and their families' cases.

CLI: ``python -m ncudnn.kernels.runtime.compile_check [MODULE_OR_FILE ...] [--case NAME] [--json] [-j N]``; with
no module, every module under ncudnn/kernels/ is imported; a module of a kernel family brings its family's
cases. Exit status 1 when any case fails.
"""
import argparse
import contextlib
import functools
import importlib
import importlib.util
import json
import os
import pathlib
import pkgutil
import re
import subprocess
import sys
import time
import types
from dataclasses import asdict, dataclass, field

TARGET_CC = (9, 0)
_JSON_MARK = "NCUDNN_COMPILE_CHECK_JSON "


@dataclass
class CompileCase:
    name: str
    func: object
    signature: str
    max_registers: int = 255
    max_local_bytes: int = 0
    module: str = ""
    file: str = ""


@dataclass
class CompileResult:
    name: str
    ok: bool = False
    problems: list = field(default_factory=list)
    registers: int = None
    spill_stores: int = None
    spill_loads: int = None
    stack_frame: int = None
    shared_bytes: int = None
    ptx_local_bytes: int = None
    cubin_info: bool = False  # True when the numbers come from ptxas (nvJitLink), not the PTX
    note: str = ""
    seconds: float = 0.0

    def summary(self):
        regs = "-" if self.registers is None else self.registers
        spills = "-" if self.spill_stores is None else f"{self.spill_stores}/{self.spill_loads}"
        stack = "-" if self.stack_frame is None else self.stack_frame
        head = f"{'ok  ' if self.ok else 'FAIL'} {self.name:40s} regs {regs!s:>4} spills {spills:>7} " \
               f"stack {stack!s:>5} ptx-local {self.ptx_local_bytes!s:>5} {self.seconds:5.1f}s"
        notes = self.problems + ([f"note: {self.note}"] if self.note else [])
        return head + "".join(f"\n       - {p}" for p in notes)


_CASES = {}
_PTX_CACHE = {}  # (py_func, signature, cc, options) -> PTX: cases sharing a kernel compile it once
_LINK_CACHE = {}  # (py_func, signature, cc, options, max_registers) -> parsed ptxas resources


def register_compile_case(name, pyfunc_or_dispatcher, signature, max_registers=255, max_local_bytes=0):
    """Add a kernel to the compile check; returns the kernel unchanged (a later registration of a name wins)."""
    py = getattr(pyfunc_or_dispatcher, "py_func", pyfunc_or_dispatcher)
    mod = getattr(py, "__module__", "") or ""
    file = getattr(sys.modules.get(mod), "__file__", None) or ""  # generated code has no file of its own
    _CASES[name] = CompileCase(name, pyfunc_or_dispatcher, str(signature), int(max_registers),
                               int(max_local_bytes), mod, file)
    return pyfunc_or_dispatcher


def registered_cases():
    """Name -> CompileCase, in registration order, every family's cases loaded first (:func:`load_cases`)."""
    load_cases()
    return dict(_CASES)


@functools.lru_cache(maxsize=None)
def family_cases_modules():
    """Import names of the kernel families' cases modules: every ``ncudnn/kernels/<family>/cases.py``."""
    pkg_dir = pathlib.Path(__file__).resolve().parents[1]  # ncudnn/kernels/
    return tuple(f"ncudnn.kernels.{p.parent.name}.cases" for p in sorted(pkg_dir.glob("*/cases.py")))


def family_cases_of(module):
    """The cases module of the kernel family ``module`` (an import name) belongs to, or None."""
    parts = module.split(".")
    if len(parts) < 3 or parts[:2] != ["ncudnn", "kernels"]:
        return None
    name = ".".join(parts[:3]) + ".cases"
    return name if name in family_cases_modules() else None


def load_cases(modules=None):
    """Import the cases modules ``modules`` (every family's by default): they register the cases."""
    for name in family_cases_modules() if modules is None else modules:
        importlib.import_module(name)


# ------------------------------------------------------------------------------------- parsing

_LOCAL_RE = re.compile(r"^\s*\.local\s+\.align\s+\d+\s+\.b8\s+\S+\[(\d+)\]", re.M)
_PROPS_RE = re.compile(r"Function properties for '?([^'\s:]+)'?")
_FRAME_RE = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_REGS_RE = re.compile(r"Used (\d+) registers")
_SMEM_RE = re.compile(r"(\d+) bytes smem")


def ptx_local_bytes(ptx):
    """Bytes of ``.local`` depots the PTX declares (local arrays and NVVM-level spills)."""
    return sum(int(n) for n in _LOCAL_RE.findall(ptx))


def parse_ptxas_log(text):
    """Per-function resources from a ptxas / nvJitLink -verbose info log.

    Returns {function: {"registers", "stack_frame", "spill_stores", "spill_loads", "shared_bytes"}};
    only the ``ptxas`` lines are read (nvJitLink repeats a summary in its own words).
    """
    funcs, current = {}, None
    for line in text.replace("\x00", "").splitlines():
        if not line.startswith("ptxas"):
            continue
        m = _PROPS_RE.search(line)
        if m:
            current = funcs.setdefault(m.group(1), {})
            continue
        m = re.search(r"Compiling entry function '([^']+)'", line)
        if m:
            current = funcs.setdefault(m.group(1), {})
            continue
        if current is None:
            continue
        m = _FRAME_RE.search(line)
        if m:
            current["stack_frame"], current["spill_stores"], current["spill_loads"] = map(int, m.groups())
        m = _REGS_RE.search(line)
        if m:
            current["registers"] = int(m.group(1))
            s = _SMEM_RE.search(line)
            current["shared_bytes"] = int(s.group(1)) if s else 0
    return funcs


def link_info_log(ptx, cc=TARGET_CC, max_registers=None):
    """nvJitLink the PTX into a cubin for sm_<cc>; returns its -verbose info log (raises on failure)."""
    from cuda.bindings import nvjitlink

    opts = [f"-arch=sm_{cc[0]}{cc[1]}", "-verbose"]
    if max_registers:
        opts.append(f"-maxrregcount={int(max_registers)}")
    h = nvjitlink.create(len(opts), opts)
    try:
        data = ptx.encode()
        try:
            nvjitlink.add_data(h, nvjitlink.InputType.PTX, data, len(data), "kernel.ptx")
            if "cudaCGSynchronize" in ptx or "cudaCGGetIntrinsicHandle" in ptx:   # grid groups: the device runtime
                from numba.cuda.cudadrv import libs
                lib = pathlib.Path(libs.get_cudalib("cudadevrt", static=True)).read_bytes()
                nvjitlink.add_data(h, nvjitlink.InputType.LIBRARY, lib, len(lib), "libcudadevrt.a")
            nvjitlink.complete(h)
        except Exception as e:
            size = nvjitlink.get_error_log_size(h)
            buf = bytearray(size)
            nvjitlink.get_error_log(h, buf)
            raise RuntimeError(f"nvJitLink failed: {e}: {buf.decode(errors='replace').strip()}") from None
        size = nvjitlink.get_info_log_size(h)
        buf = bytearray(size)
        nvjitlink.get_info_log(h, buf)
        return buf.decode(errors="replace").replace("\x00", "")
    finally:
        nvjitlink.destroy(h)


# ----------------------------------------------------------------------------------- checking

@contextlib.contextmanager
def _target_device(cc):
    """Overloads compiled as device functions (e.g. ``cuda.cg.this_grid``) ask the current device for its
    compute capability; on a machine with no driver this answers with the target's for the compile."""
    from numba.cuda import dispatcher

    real = dispatcher.get_current_device
    try:
        real()
        have_driver = True
    except Exception:
        have_driver = False
    if have_driver:
        yield
        return
    dispatcher.get_current_device = lambda: types.SimpleNamespace(compute_capability=tuple(cc))
    try:
        yield
    finally:
        dispatcher.get_current_device = real


def compile_case(case, cc=TARGET_CC):
    """Compile one case (simulator off) and judge it against its budgets."""
    from numba import cuda

    if cuda.compile_ptx is None:
        raise RuntimeError("numba's CUDA simulator cannot compile: use run_compile_check()")
    res = CompileResult(case.name)
    t0 = time.perf_counter()
    py = getattr(case.func, "py_func", case.func)
    opts = dict(getattr(case.func, "targetoptions", None) or {})
    kw = {"fastmath": bool(opts.get("fastmath", False))}
    if opts.get("launch_bounds"):
        kw["launch_bounds"] = opts["launch_bounds"]
    key = (py, case.signature, cc, repr(sorted(kw.items())))
    try:
        ptx = _PTX_CACHE.get(key)
        if ptx is None:
            with _target_device(cc):
                ptx = _PTX_CACHE[key] = cuda.compile_ptx(py, case.signature, cc=cc, **kw)[0]
    except Exception as e:
        res.problems.append(f"compile failed: {type(e).__name__}: {' '.join(str(e).split())[:400]}")
        res.seconds = time.perf_counter() - t0
        return res
    res.ptx_local_bytes = ptx_local_bytes(ptx)
    try:
        # one link per (PTX, options) in a process: a second identical link may be served from a JIT
        # cache that prints no ptxas lines (seen on the H200 with two budgets over one kernel)
        lkey = key + (opts.get("max_registers"),)
        funcs = _LINK_CACHE.get(lkey)
        if funcs is None:
            funcs = parse_ptxas_log(link_info_log(ptx, cc, opts.get("max_registers")))
            if funcs:
                _LINK_CACHE[lkey] = funcs
    except Exception as e:
        funcs = {}
        link_problem = f"no cubin info ({' '.join(str(e).split())[:300]}): judged on the PTX"
    else:
        link_problem = "no cubin info (nothing parsable in the nvJitLink log): judged on the PTX"
    if funcs and any("registers" in f for f in funcs.values()):
        res.cubin_info = True
        res.registers = max(f.get("registers", 0) for f in funcs.values())
        res.stack_frame = max(f.get("stack_frame", 0) for f in funcs.values())
        res.spill_stores = sum(f.get("spill_stores", 0) for f in funcs.values())
        res.spill_loads = sum(f.get("spill_loads", 0) for f in funcs.values())
        res.shared_bytes = max(f.get("shared_bytes", 0) for f in funcs.values())
        if res.spill_stores or res.spill_loads:
            res.problems.append(f"register spills: {res.spill_stores} bytes stored, {res.spill_loads} "
                                "bytes loaded")
        if res.registers > case.max_registers:
            res.problems.append(f"{res.registers} registers > budget {case.max_registers}")
        if res.stack_frame > case.max_local_bytes:
            res.problems.append(f"{res.stack_frame} bytes stack frame (local memory) > budget "
                                f"{case.max_local_bytes}")
    else:
        res.note = link_problem
        if res.ptx_local_bytes > case.max_local_bytes:
            res.problems.append(f"PTX declares {res.ptx_local_bytes} bytes of .local memory > budget "
                                f"{case.max_local_bytes}")
    res.ok = not res.problems
    res.seconds = time.perf_counter() - t0
    return res


def _compile_one(name, cc):
    return compile_case(_CASES[name], cc)


def _compile_all(cases, cc, jobs):
    """Results in case order; ``jobs`` > 1 compiles in forked workers (they inherit the registry)."""
    if jobs <= 1 or len(cases) <= 1:
        for c in cases:
            yield compile_case(c, cc)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    ctx = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
        yield from pool.map(_compile_one, [c.name for c in cases], [cc] * len(cases))


def _select(names):
    if names is None or any(n not in _CASES for n in names):
        load_cases()
    if names is None:
        return list(_CASES.values())
    missing = [n for n in names if n not in _CASES]
    if missing:
        raise KeyError(f"no compile case named {missing}")
    return [_CASES[n] for n in names]


def _module_ref(case):
    """How a fresh process finds the module that registers a case: its import name, or its file."""
    if case.module.startswith("ncudnn.") or not case.file:
        return case.module
    return case.file


def _sim_off_env():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0")
    root = str(pathlib.Path(__file__).resolve().parents[3])  # the directory holding ncudnn/
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


def run_compile_check(names=None, cc=TARGET_CC, timeout=600, jobs=1):
    """Compile the named cases (every registered one, every family's loaded, by default); a list of CompileResult.

    In the simulator the work happens in a subprocess with the simulator off (``jobs`` workers there);
    otherwise in this process, one case after another.
    """
    from ...platform import simulator_enabled

    cases = _select(names)
    if not simulator_enabled():
        return [compile_case(c, cc) for c in cases]
    if not cases:
        return []
    refs = list(dict.fromkeys(_module_ref(c) for c in cases))
    cmd = [sys.executable, "-m", "ncudnn.kernels.runtime.compile_check", "--json", "--cc", f"{cc[0]}.{cc[1]}",
           "--jobs", str(int(jobs)), *refs]
    for c in cases:
        cmd += ["--case", c.name]
    out = subprocess.run(cmd, env=_sim_off_env(), capture_output=True, text=True, timeout=timeout)
    for line in reversed(out.stdout.splitlines()):
        if line.startswith(_JSON_MARK):
            return [CompileResult(**r) for r in json.loads(line[len(_JSON_MARK):])]
    raise RuntimeError(f"compile check subprocess failed (rc {out.returncode}):\n{out.stderr[-3000:]}")


# ------------------------------------------------------------------------------------------ CLI

def _import_ref(ref):
    if ref.endswith(".py") or os.sep in ref:
        path = pathlib.Path(ref).resolve()
        name = f"_compile_check_{path.stem}"
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
        return mod
    return importlib.import_module(ref)


def _all_kernel_modules():
    pkg_dir = pathlib.Path(__file__).resolve().parents[1]  # ncudnn/kernels/
    for info in pkgutil.walk_packages([str(pkg_dir)], prefix="ncudnn.kernels."):
        if info.name != __name__ and not info.name.endswith((".compile_check", ".__main__")):
            yield info.name


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m ncudnn.kernels.runtime.compile_check",
                                 description="Compile registered kernels for sm_90 (no GPU needed) and check "
                                             "registers, spills and local memory.")
    ap.add_argument("modules", nargs="*", help="modules or .py files that register cases "
                                               "(default: every module under ncudnn/kernels/)")
    ap.add_argument("--case", action="append", help="only this case (repeatable)")
    ap.add_argument("--cc", default=f"{TARGET_CC[0]}.{TARGET_CC[1]}", help="target compute capability")
    ap.add_argument("--json", action="store_true", help="print the results as one JSON line")
    ap.add_argument("--jobs", "-j", type=int, default=1, help="compile this many cases at once (forked workers)")
    argv = sys.argv[1:] if argv is None else list(argv)
    args = ap.parse_args(argv)
    from ...platform import simulator_enabled

    if simulator_enabled():  # numba cannot compile in the simulator: the same command with it off
        cmd = [sys.executable, "-m", "ncudnn.kernels.runtime.compile_check", *argv]
        return subprocess.run(cmd, env=_sim_off_env()).returncode
    cc = tuple(int(x) for x in args.cc.split("."))
    results = []

    def report(r):
        results.append(r)
        if not args.json:
            print(r.summary(), flush=True)

    refs = args.modules or list(_all_kernel_modules())
    # a module of a kernel family registers nothing itself: its family's cases module does
    refs += [m for m in dict.fromkeys(family_cases_of(r) for r in refs) if m and m not in refs]
    for ref in refs:
        try:
            _import_ref(ref)
        except Exception as e:
            report(CompileResult(f"import {ref}", problems=[f"{type(e).__name__}: {e}"]))
    try:
        cases = list(_CASES.values()) if args.case is None else _select(args.case)
    except KeyError as e:
        report(CompileResult("select cases", problems=[str(e)]))
        cases = []
    for r in _compile_all(cases, cc, args.jobs):
        report(r)
    if args.json:
        print(_JSON_MARK + json.dumps([asdict(r) for r in results]))
    else:
        bad = sum(not r.ok for r in results)
        print(f"{len(results) - bad} passed, {bad} failed" if results else "no compile cases registered")
    return 1 if any(not r.ok for r in results) else 0


if __name__ == "__main__":
    # Run the imported module's main: kernel modules register into ncudnn.kernels.runtime.compile_check, not __main__.
    from ncudnn.kernels.runtime import compile_check

    sys.exit(compile_check.main())
