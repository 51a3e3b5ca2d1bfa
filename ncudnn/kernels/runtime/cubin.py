"""Compile-time checks without a GPU: compile a kernel to a cubin for any compute capability and read
its resources.

:func:`compile_cubin` compiles a ``cuda.jit`` dispatcher for ``cc`` (numba -> NVVM PTX -> nvJitLink
cubin, from the CUDA 13 wheels) in a process with ``NUMBA_ENABLE_CUDASIM=0`` (no GPU needed; the kernel
cache's :meth:`~ncudnn.kernels.runtime.kcache.KernelCache.prewarm` writes such cubins);
:func:`resource_usage` reports registers, spills, stack, shared / constant / local memory of a cubin,
PTX, dispatcher or CompiledKernel (ptxas' log through :func:`parse_link_log`, the cubin's ``.nv.info``
through :func:`cubin_resources`); :func:`resource_usage_subprocess` does it for a kernel factory from a
simulator process (CI).
"""
import json
import os
import re
import struct
import subprocess
import sys

from .launch import SIM, CompiledKernel, normalize_argtypes

__all__ = ["compile_cubin", "link_ptx", "parse_link_log", "cubin_resources", "resource_usage",
           "resource_usage_subprocess"]


def _arch(cc):
    if isinstance(cc, str):
        return cc if cc.startswith("sm_") else f"sm_{cc}"
    return f"sm_{cc[0]}{cc[1]}"


def _cc_tuple(cc):
    if isinstance(cc, str):  # "sm_90", "sm_100", "90"
        digits = cc[3:] if cc.startswith("sm_") else cc
        digits = digits.rstrip("af")
        return int(digits[:-1]), int(digits[-1])
    return tuple(int(c) for c in cc)


def _need_real_target(what):
    if SIM:
        raise RuntimeError(f"{what} needs numba's real CUDA target: run it in a process with "
                           "NUMBA_ENABLE_CUDASIM=0 (no GPU needed), e.g. via resource_usage_subprocess")


def link_ptx(ptx, cc=(9, 0), max_registers=None):
    """(cubin bytes, nvJitLink info log) for PTX text; ``-verbose`` makes ptxas report resources."""
    from cuda.bindings import nvjitlink

    opts = [f"-arch={_arch(cc)}", "-verbose"]
    if max_registers:
        opts.append(f"-maxrregcount={int(max_registers)}")
    h = nvjitlink.create(len(opts), opts)
    try:
        data = ptx.encode() if isinstance(ptx, str) else bytes(ptx)
        try:
            nvjitlink.add_data(h, nvjitlink.InputType.PTX, data, len(data), "kernel.ptx")
            nvjitlink.complete(h)
        except nvjitlink.nvJitLinkError as e:
            raise RuntimeError(f"nvJitLink failed: {e}\n{_jitlink_log(h, True)}") from None
        buf = bytearray(nvjitlink.get_linked_cubin_size(h))
        nvjitlink.get_linked_cubin(h, buf)
        return bytes(buf), _jitlink_log(h)
    finally:
        nvjitlink.destroy(h)


def _jitlink_log(h, error=False):
    from cuda.bindings import nvjitlink

    size = (nvjitlink.get_error_log_size if error else nvjitlink.get_info_log_size)(h)
    buf = bytearray(size)
    if size:
        (nvjitlink.get_error_log if error else nvjitlink.get_info_log)(h, buf)
    return buf.rstrip(b"\0").decode(errors="replace")


def compile_cubin(func, signature, cc=(9, 0)):
    """Compile a ``cuda.jit`` dispatcher (or plain function) for ``cc`` without a GPU.

    Returns dict(cubin, ptx, entry_name, log). The dispatcher's fastmath / lineinfo / opt /
    launch_bounds / max_registers options are kept; ``link=`` files are not linked.
    """
    _need_real_target("compile_cubin")
    from numba.cuda import compile_ptx

    py_func = getattr(func, "py_func", func)
    opts = dict(getattr(func, "targetoptions", None) or {})
    kw = {k: opts[k] for k in ("fastmath", "lineinfo", "opt", "launch_bounds") if opts.get(k) is not None}
    cc_t = _cc_tuple(cc)
    ptx, _ = compile_ptx(py_func, normalize_argtypes(signature), cc=cc_t, **kw)
    m = re.search(r"\.entry\s+([\w$.]+)", ptx)
    cubin, log = link_ptx(ptx, cc, opts.get("max_registers"))
    return dict(cubin=cubin, ptx=ptx, entry_name=m.group(1) if m else None, log=log)


_LOG_FIELDS = [
    (re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads"),
     ("stack_frame", "spill_stores", "spill_loads")),
    (re.compile(r"[Uu]sed (\d+) registers"), ("registers",)),
    (re.compile(r"used (\d+) barriers"), ("barriers",)),
    (re.compile(r"(\d+) bytes smem"), ("shared",)),
    (re.compile(r"(\d+) bytes cmem\[0\]"), ("const",)),
    (re.compile(r"(\d+) bytes lmem"), ("local",)),
]
_LOG_FUNC = re.compile(r"(?:Function properties for|Compiling entry function) '?([\w$.]+)'?")


def parse_link_log(log):
    """{function name: {registers, stack_frame, spill_stores, spill_loads, barriers, shared, const, local}}
    from a ``-verbose`` ptxas / nvJitLink info log."""
    out, cur = {}, None
    for line in log.splitlines():
        m = _LOG_FUNC.search(line)
        if m:
            cur = out.setdefault(m.group(1), {})
            continue
        if cur is None:
            continue
        for rx, names in _LOG_FIELDS:
            m = rx.search(line)
            if m:
                cur.update({n: int(v) for n, v in zip(names, m.groups())})
    return out


_EIATTR_FRAME_SIZE, _EIATTR_REGCOUNT = 0x11, 0x2F


def _elf_sections(cubin):
    if cubin[:4] != b"\x7fELF" or cubin[4] != 2:
        raise ValueError("not a 64-bit ELF cubin")
    (shoff,) = struct.unpack_from("<Q", cubin, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
    raw = [struct.unpack_from("<IIQQQQIIQQ", cubin, shoff + i * shentsize) for i in range(shnum)]
    stroff = raw[shstrndx][4]

    def name(off):
        return cubin[stroff + off:cubin.index(b"\0", stroff + off)].decode()
    return {name(s[0]): dict(type=s[1], offset=s[4], size=s[5], link=s[6], info=s[7]) for s in raw}


def _nv_info(cubin, sec):
    """(attribute, payload bytes) records of an .nv.info section."""
    d, p, out = cubin[sec["offset"]:sec["offset"] + sec["size"]], 0, []
    while p + 4 <= len(d):
        fmt, attr = d[p], d[p + 1]
        if fmt == 4:  # EIFMT_SVAL: u16 size + payload
            (n,) = struct.unpack_from("<H", d, p + 2)
            out.append((attr, d[p + 4:p + 4 + n]))
            p += 4 + n
        else:  # NVAL / BVAL / HVAL: value in the 2 bytes after the header
            out.append((attr, d[p + 2:p + 4]))
            p += 4
    return out


def cubin_resources(cubin, entry_name=None):
    """registers, stack_frame, shared (static), const (bank 0) of a kernel in a cubin, read from the ELF.

    Spills are not recorded in a cubin (use :func:`resource_usage` on PTX or a dispatcher for those).
    """
    cubin = bytes(cubin)
    secs = _elf_sections(cubin)
    if entry_name is None:
        kernels = [n[len(".nv.constant0."):] for n in secs if n.startswith(".nv.constant0.")]
        if not kernels:
            raise ValueError("no kernel in the cubin")
        entry_name = kernels[0]
    text = secs.get(".text." + entry_name)
    if text is None:
        raise KeyError(f"kernel {entry_name!r} not in the cubin")
    sym_index = _symbol_index(cubin, secs, entry_name)
    out = dict(entry_name=entry_name, registers=text["info"] >> 24 or None, stack_frame=None,
               shared=secs.get(".nv.shared." + entry_name, {}).get("size", 0),
               const=secs.get(".nv.constant0." + entry_name, {}).get("size", 0))
    if ".nv.info" in secs:
        for attr, payload in _nv_info(cubin, secs[".nv.info"]):
            if len(payload) == 8 and struct.unpack_from("<I", payload)[0] == sym_index:
                (value,) = struct.unpack_from("<I", payload, 4)
                if attr == _EIATTR_REGCOUNT:
                    out["registers"] = value
                elif attr == _EIATTR_FRAME_SIZE:
                    out["stack_frame"] = value
    return out


def _symbol_index(cubin, secs, name):
    symtab = secs.get(".symtab")
    if symtab is None:
        return -1
    stroff = _section_by_index(cubin, symtab["link"])["offset"]
    want = name.encode()
    for i in range(symtab["size"] // 24):
        (st_name,) = struct.unpack_from("<I", cubin, symtab["offset"] + 24 * i)
        end = cubin.index(b"\0", stroff + st_name)
        if cubin[stroff + st_name:end] == want:
            return i
    return -1


def _section_by_index(cubin, index):
    (shoff,) = struct.unpack_from("<Q", cubin, 0x28)
    (shentsize,) = struct.unpack_from("<H", cubin, 0x3A)
    s = struct.unpack_from("<IIQQQQIIQQ", cubin, shoff + index * shentsize)
    return dict(offset=s[4], size=s[5])


def resource_usage(obj, signature=None, cc=(9, 0), entry_name=None):
    """Resource usage of a kernel as a dict (None where a source cannot tell).

    ``obj``: cubin bytes (ELF read directly); PTX text (linked with nvJitLink ``-verbose``); a
    ``cuda.jit`` dispatcher or function with ``signature`` (compiled for ``cc`` without a GPU, in a
    process with NUMBA_ENABLE_CUDASIM=0); or a GPU CompiledKernel (driver attributes). Keys:
    registers, spill_stores, spill_loads, stack_frame, local, shared (static), const, barriers,
    max_threads, entry_name, source.
    """
    keys = ("registers", "spill_stores", "spill_loads", "stack_frame", "local", "shared", "const",
            "barriers", "max_threads")
    out = dict.fromkeys(keys)
    if isinstance(obj, CompiledKernel) and obj.function is not None:
        a = obj.attrs
        out.update(registers=a.get("regs"), shared=a.get("shared"), local=a.get("local"),
                   const=a.get("const"), max_threads=a.get("maxthreads"), entry_name=obj.entry_name,
                   source="driver")
        return out
    if isinstance(obj, (bytes, bytearray)) and bytes(obj[:4]) == b"\x7fELF":
        out.update(cubin_resources(obj, entry_name), source="cubin")
        return out
    if isinstance(obj, str):
        cubin, log = link_ptx(obj, cc)
        m = re.search(r"\.entry\s+([\w$.]+)", obj)
        name = entry_name or (m.group(1) if m else None)
    else:
        if isinstance(obj, CompiledKernel):
            obj = obj.dispatcher
        built = compile_cubin(obj, signature, cc)
        cubin, log, name = built["cubin"], built["log"], built["entry_name"]
    out.update(cubin_resources(cubin, name))
    logged = parse_link_log(log).get(out["entry_name"], {})
    out.update({k: v for k, v in logged.items() if v is not None}, source="nvjitlink")
    return out


_CHILD = r'''
import importlib, json, sys
req = json.loads(sys.stdin.read())
from ncudnn.kernels.runtime.cubin import resource_usage
def ref(s):
    mod, _, name = s.partition(":")
    obj = importlib.import_module(mod)
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj
made = ref(req["factory"])(*req["args"], **req["kwargs"])
sig = req["signature"]
if ":" in sig and "(" not in sig:
    sig = ref(sig)(made)
disp = made if hasattr(made, "py_func") else getattr(made, "kernel", made)
print("NCUDNN-RESOURCES " + json.dumps(resource_usage(disp, sig, tuple(req["cc"]))))
'''


def resource_usage_subprocess(factory, signature, args=(), kwargs=None, cc=(9, 0), timeout=600):
    """:func:`resource_usage` of ``factory(*args, **kwargs)`` compiled in a child process with the
    simulator off (usable from a simulator process, e.g. CI).

    ``factory`` and, optionally, ``signature`` are ``"package.module:callable"`` references; a
    signature reference is called with the factory's result. The factory returns a dispatcher or an
    object whose ``.kernel`` is one. JSON-serialisable ``args`` / ``kwargs`` only.
    """
    req = dict(factory=factory, signature=signature, args=list(args), kwargs=dict(kwargs or {}),
               cc=list(cc))
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0")
    p = subprocess.run([sys.executable, "-c", _CHILD], input=json.dumps(req), capture_output=True,
                       text=True, timeout=timeout, env=env)
    for line in p.stdout.splitlines():
        if line.startswith("NCUDNN-RESOURCES "):
            return json.loads(line[len("NCUDNN-RESOURCES "):])
    raise RuntimeError(f"resource check of {factory} failed (exit {p.returncode}):\n{p.stderr[-3000:]}")
