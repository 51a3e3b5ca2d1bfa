"""Catching the kernels a plan build compiles, and the Python source each was made from.

Kernels reach the launch path through :func:`ncudnn.kernels.runtime.kcache.get_or_compile` (a cache key and a
factory of the ``cuda.jit`` dispatcher): :func:`collecting` wraps the process-wide cache's method while a
plan is built and records every (key, dispatcher), whatever the cache already held.

A generated kernel is Python source run with ``exec`` by its factory; once run, only its code object is left.
:func:`install` adds an audit hook (``sys.addaudithook``: the interpreter's ``compile`` and ``exec`` events,
no patching of builtins) that keeps each source string with the module code object made from it, so
:func:`source_of` finds the whole generated module of a kernel function (its device helpers included). A
kernel written as a plain function, or as a closure in a kernel module, is shown with
``inspect.getsource``. Sources generated before :func:`install` ran (a factory's cached result in a
long-lived process) cannot be recovered: ``python -m ncudnn.kernels show`` installs the hook before any
kernel module generates anything.
"""
import contextlib
import inspect
import sys
import threading
import types

_lock = threading.Lock()
_installed = False
_pending = threading.local()
#: module code object compiled from a string -> that string
_SOURCES = {}


def _hook(event, args):
    if event == "compile":
        src, filename = args[0], args[1]
        if isinstance(src, bytes):
            try:
                src = src.decode("utf-8")
            except UnicodeDecodeError:
                return
        # a kernel module's own file is compiled on import too: only sources with no file ("<...>") are kept
        generated = isinstance(src, str) and str(filename).startswith("<")
        _pending.item = (src, filename) if generated else None
    elif event == "exec":
        item = getattr(_pending, "item", None)
        code = args[0]
        if item is not None and isinstance(code, types.CodeType) and code.co_filename == item[1]:
            _SOURCES[code] = item[0]
            _pending.item = None


def install():
    """Start recording generated sources (idempotent; an audit hook stays for the life of the process)."""
    global _installed
    with _lock:
        if not _installed:
            sys.addaudithook(_hook)
            _installed = True


def _codes(code):
    yield code
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            yield from _codes(c)


def python_function(dispatcher):
    """The Python function behind a ``cuda.jit`` dispatcher (numba's or the simulator's), or None."""
    for attr in ("py_func", "__wrapped__", "fn"):
        f = getattr(dispatcher, attr, None)
        if isinstance(f, types.FunctionType):
            return f
    return dispatcher if isinstance(dispatcher, types.FunctionType) else None


def source_of(fn):
    """(kind, text): ("generated", the whole module source the function was exec'd from), ("defined",
    ``inspect.getsource`` of a function in a file) or ("unavailable", why)."""
    target = fn.__code__
    for module_code, src in list(_SOURCES.items()):
        if module_code.co_filename == target.co_filename and any(c is target for c in _codes(module_code)):
            return "generated", src
    try:
        return "defined", inspect.getsource(fn)
    except (OSError, TypeError):
        return "unavailable", (f"the source of {fn.__qualname__} ({target.co_filename}) was generated before "
                               "the source recorder was installed; run `python -m ncudnn.kernels show` in a fresh "
                               "process")


_SIMPLE = (bool, int, float, str, type(None))


def _simple(v):
    if isinstance(v, _SIMPLE):
        return True
    return isinstance(v, tuple) and len(v) <= 16 and all(isinstance(x, _SIMPLE) for x in v)


def constants(fn):
    """name -> value of the compile-time constants the kernel reads: its closure's cells and the globals
    its code names (numbers, strings, small tuples; modules and functions left out)."""
    out = {}
    for name, v in _referenced(fn):
        if name not in out and not name.startswith("__") and _simple(v):
            out[name] = v
    return out


def _referenced(fn):
    """(name, value) of the closure cells and globals ``fn``'s code names."""
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
        try:
            yield name, cell.cell_contents
        except ValueError:
            continue
    names = set()
    for c in _codes(fn.__code__):
        names.update(c.co_names)
    for name in sorted(names):
        if name in fn.__globals__:
            yield name, fn.__globals__[name]


def generated_helpers(fn):
    """[(name, source)] of the generated device functions ``fn`` calls, directly or through other device
    functions (each generated module once), in the order first reached."""
    out, seen, stack = [], {fn.__code__}, [fn]
    while stack:
        for name, value in _referenced(stack.pop(0)):
            helper = python_function(value) if not isinstance(value, types.ModuleType) else None
            if helper is None or helper.__code__ in seen:
                continue
            seen.add(helper.__code__)
            stack.append(helper)
            kind, src = source_of(helper)
            if kind == "generated" and all(src != s for _, s in out):
                out.append((name, src))
    return out


@contextlib.contextmanager
def collecting():
    """Record ``[(cache key, dispatcher), ...]`` of every kernel fetched from the process-wide kernel cache in
    the block (each factory is run, cache hit or not)."""
    from ..kernels.runtime import kcache

    cache = kcache.default_cache()
    found = []
    plain = cache.get_or_compile

    def recording(key, build_dispatcher_fn, signature):
        dispatcher = build_dispatcher_fn()
        found.append((key, dispatcher))
        return plain(key, lambda: dispatcher, signature)

    cache.get_or_compile = recording
    try:
        yield found
    finally:
        del cache.get_or_compile
