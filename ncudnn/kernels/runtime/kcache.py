"""Kernel cache: compiled kernels kept in memory and, on a GPU, as cubins on disk across processes.

numba's own disk cache cannot hold kernels made at run time by closures or ``exec`` (our kernel
factories), so every process would JIT again. Here the engine layer names each kernel with a spec
key string (the factory and its knob values) and calls :func:`get_or_compile`:

* memory hit: the same :class:`~ncudnn.kernels.runtime.launch.CompiledKernel` object;
* disk hit (GPU): the cubin is loaded with ``cuModuleLoadData`` / ``cuModuleGetFunction`` and wrapped in
  a CompiledKernel; numba does not compile anything;
* miss: ``build_dispatcher_fn()`` makes the ``cuda.jit`` dispatcher, numba compiles it for the
  signature, and the cubin, the kernel's mangled entry name and its attributes are written to disk.

The full key is (spec key, signature, compute capability, numba-cuda version, ncudnn version); its
SHA-256 names the file ``<root>/<cc>/<digest>.kc`` with root ``$NCUDNN_CACHE_DIR`` or
``~/.cache/ncudnn/kernels``. Writes are atomic (temp file + rename); an unreadable, truncated or
mismatching entry is counted as corrupt, ignored and rewritten; the directory is kept under a size
cap (``$NCUDNN_CACHE_MAX_BYTES``, default 1 GiB) by deleting the least recently used entries (a hit
refreshes the file's mtime). Under the CUDA simulator there is no cubin: the cache is in memory only.

Trust: a cache entry is GPU code this process will run, so (as ssh does for its keys) a cache directory
not owned by the user, or writable by group / others, is refused and logged once: the cache then works
in memory only. Ancestors of the root must be the user's or root's, and not group / other writable
unless sticky (``/tmp``); an entry file must be the user's and not group / other writable. The size-cap
cleanup deletes entries only, never another writer's ``.tmp-*`` file.

Compile-time checks without a GPU live in :mod:`ncudnn.kernels.runtime.cubin` (:func:`compile_cubin`,
:func:`resource_usage`, :func:`resource_usage_subprocess`, ...; importable from here too):
:meth:`KernelCache.prewarm` writes such cubins into the cache, so a GPU process need not JIT at all.
"""
import hashlib
import importlib.metadata
import json
import os
import stat
import struct
import tempfile
import threading
from dataclasses import dataclass, field

from .cubin import (compile_cubin, cubin_resources, link_ptx, parse_link_log,  # noqa: F401 (public here too)
                    resource_usage, resource_usage_subprocess)
from .launch import SIM, CompiledKernel, normalize_argtypes

__all__ = ["KernelCache", "CacheEntry", "CorruptEntry", "get_or_compile", "default_cache", "stats",
           "make_key", "key_digest", "device_cc", "versions", "encode_entry", "decode_entry",
           "compile_cubin", "link_ptx", "parse_link_log", "cubin_resources", "resource_usage",
           "resource_usage_subprocess"]

MAGIC = b"NCUDNN-KCACHE\x01\n"
SUFFIX = ".kc"
DEFAULT_MAX_BYTES = 1 << 30


class CorruptEntry(ValueError):
    """A cache file that cannot be trusted (bad magic, truncated, wrong key, checksum mismatch)."""


@dataclass
class CacheEntry:
    """What a cache file holds: the code image and what is needed to launch it without numba."""

    key: str
    image: bytes
    entry_name: str
    kind: str = "cubin"
    attrs: dict = field(default_factory=dict)
    cooperative: bool = False


# ------------------------------------------------------------------------------------------- keys

_versions = None


def versions():
    """(numba-cuda version, ncudnn version + a digest of the kernel layer's source) as installed.

    The source digest keeps a cubin compiled from older kernel code from being loaded after the code
    changed under the same version number (a development checkout, an editable install)."""
    global _versions
    if _versions is None:
        def v(dist):
            try:
                return importlib.metadata.version(dist)
            except importlib.metadata.PackageNotFoundError:
                return "unknown"
        _versions = (v("numba-cuda"), f"{v('ncudnn')}+{kernel_source_digest()}")
    return _versions


def kernel_source_digest():
    """SHA-256 (first 16 hex digits) over every .py file of ncudnn/kernels, by relative path and content."""
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[1]  # ncudnn/kernels/
    h = hashlib.sha256()
    for f in sorted(root.rglob("*.py")):
        h.update(str(f.relative_to(root)).encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def device_cc():
    """``sm_XY`` of the current device, ``sim`` under the simulator."""
    if SIM:
        return "sim"
    from numba import cuda

    major, minor = cuda.get_current_device().compute_capability
    return f"sm_{major}{minor}"


def make_key(spec_key, signature, cc=None):
    """The full cache key string: stable across processes (no Python ``hash``)."""
    argtypes = normalize_argtypes(signature)
    numba_cuda, ncudnn = versions()
    return json.dumps([str(spec_key), str(argtypes), cc or device_cc(), numba_cuda, ncudnn],
                      separators=(",", ":"))


def key_digest(key):
    return hashlib.sha256(key.encode()).hexdigest()


# ----------------------------------------------------------------------------------- file format

def encode_entry(entry):
    """MAGIC, u32 header length, JSON header (key, entry name, attrs, payload size and SHA-256), payload."""
    image = bytes(entry.image)
    header = json.dumps({"key": entry.key, "entry_name": entry.entry_name, "kind": entry.kind,
                         "attrs": entry.attrs, "cooperative": bool(entry.cooperative),
                         "size": len(image), "sha256": hashlib.sha256(image).hexdigest()}).encode()
    return MAGIC + struct.pack("<I", len(header)) + header + image


def decode_entry(data, key):
    """The CacheEntry in ``data``; raises CorruptEntry unless it is whole and made for ``key``."""
    n = len(MAGIC)
    if len(data) < n + 4 or data[:n] != MAGIC:
        raise CorruptEntry("bad magic")
    (hlen,) = struct.unpack_from("<I", data, n)
    start = n + 4 + hlen
    if start > len(data):
        raise CorruptEntry("truncated header")
    try:
        h = json.loads(data[n + 4:start].decode())
        image = data[start:]
        if h["key"] != key:
            raise CorruptEntry("entry written for another key")
        if len(image) != h["size"] or hashlib.sha256(image).hexdigest() != h["sha256"]:
            raise CorruptEntry("payload size or checksum mismatch")
        return CacheEntry(key=h["key"], image=image, entry_name=h["entry_name"], kind=h["kind"],
                          attrs=dict(h["attrs"]), cooperative=bool(h["cooperative"]))
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
        if isinstance(e, CorruptEntry):
            raise
        raise CorruptEntry(f"bad header: {e}") from None


# ------------------------------------------------------------------------- GPU compile and load

def compile_numba(build_dispatcher_fn, argtypes):
    """Miss path: numba compiles; returns (CompiledKernel, CacheEntry or None when not cacheable)."""
    kernel = CompiledKernel(build_dispatcher_fn(), argtypes)
    if SIM:
        return kernel, None
    nk = kernel.numba_kernel
    lib = nk.library
    # Module setup callbacks (NRT), debug exception flags and launch-config specialisation need numba.
    if (lib._setup_functions or lib._teardown_functions or nk.debug
            or getattr(nk, "launch_config_sensitive", False)):
        return kernel, None
    image = lib.get_cubin()
    image = getattr(image, "code", image)
    if not isinstance(image, (bytes, bytearray)):
        return kernel, None
    return kernel, CacheEntry(key="", image=bytes(image), entry_name=kernel.entry_name,
                              attrs=dict(kernel.attrs), cooperative=kernel.cooperative)


_ATTRS = ("regs", "NUM_REGS"), ("shared", "SHARED_SIZE_BYTES"), ("local", "LOCAL_SIZE_BYTES"), \
         ("const", "CONST_SIZE_BYTES"), ("maxthreads", "MAX_THREADS_PER_BLOCK")


def load_cubin(entry, argtypes):
    """Warm path: cuModuleLoadData + cuModuleGetFunction in numba's (primary) context; no compile."""
    from cuda.bindings import driver as drv
    from numba import cuda

    from .launch import _check

    cuda.current_context()  # make the primary context current, shared with numba and torch
    image = entry.image + b"\0" if entry.kind == "ptx" else entry.image  # PTX is loaded NUL-terminated
    module = _check(drv.cuModuleLoadData(image), "cuModuleLoadData")
    fn = _check(drv.cuModuleGetFunction(module, entry.entry_name.encode()), "cuModuleGetFunction")
    attrs = {}
    for name, attr in _ATTRS:
        a = getattr(drv.CUfunction_attribute, "CU_FUNC_ATTRIBUTE_" + attr)
        attrs[name] = int(_check(drv.cuFuncGetAttribute(a, fn), "cuFuncGetAttribute"))
    return CompiledKernel.from_function(fn, argtypes, entry.entry_name, attrs, module=module,
                                        cooperative=entry.cooperative)


# ------------------------------------------------------------------------------------ the cache

class KernelCache:
    """In-memory map of CompiledKernels over an optional directory of cubins.

    ``disk`` defaults to True on a GPU and False in the simulator. ``compile_fn(build, argtypes) ->
    (CompiledKernel, CacheEntry | None)`` and ``load_fn(entry, argtypes) -> CompiledKernel`` default
    to numba + the driver; tests substitute them to exercise the disk layer without a GPU.
    """

    def __init__(self, directory=None, max_bytes=None, disk=None, compile_fn=None, load_fn=None,
                 cc=None):
        self._directory = directory
        self.max_bytes = int(max_bytes if max_bytes is not None
                             else os.environ.get("NCUDNN_CACHE_MAX_BYTES", DEFAULT_MAX_BYTES))
        self.disk = (not SIM) if disk is None else bool(disk)
        self.compile_fn = compile_fn or compile_numba
        self.load_fn = load_fn or load_cubin
        self._cc = cc
        self._mem = {}
        self._key_locks = {}
        self._lock = threading.Lock()
        self.stats = dict(memory_hits=0, disk_hits=0, misses=0, writes=0, corrupt=0, evicted=0)

    @property
    def cc(self):
        if self._cc is None:
            self._cc = device_cc()
        return self._cc

    @property
    def directory(self):
        root = self._directory or os.environ.get("NCUDNN_CACHE_DIR") or os.path.join(
            os.path.expanduser("~"), ".cache", "ncudnn", "kernels")
        return os.path.join(root, self.cc)

    def path_for(self, key):
        return os.path.join(self.directory, key_digest(key) + SUFFIX)

    def trusted(self):
        """Whether this cache's directory may be read and written (see the module docstring); the
        first refusal of a directory is logged as a warning."""
        why = untrusted_reason(self.directory)
        if why is not None and self.directory not in _refused:
            _refused.add(self.directory)
            _warn(f"kernel cache {self.directory} is not used (memory only): {why}")
        return why is None

    def get_or_compile(self, key, build_dispatcher_fn, signature):
        """The CompiledKernel for spec ``key`` and ``signature``; ``build_dispatcher_fn()`` runs on a miss.

        Thread-safe: one thread compiles a given key while the others wait for it; hits on other keys
        are not held up by a compile.
        """
        argtypes = normalize_argtypes(signature)
        full = make_key(key, argtypes, self.cc)
        with self._lock:
            kernel = self._mem.get(full)
            if kernel is not None:
                self.stats["memory_hits"] += 1
                return kernel
            key_lock = self._key_locks.setdefault(full, threading.Lock())
        with key_lock:
            with self._lock:
                kernel = self._mem.get(full)
                if kernel is not None:  # another thread finished it meanwhile
                    self.stats["memory_hits"] += 1
                    return kernel
            disk = self.disk and self.trusted()
            kernel = self._load(full, argtypes) if disk else None
            if kernel is not None:
                self._count("disk_hits")
            else:
                self._count("misses")
                kernel, entry = self.compile_fn(build_dispatcher_fn, argtypes)
                if disk and entry is not None:
                    entry.key = full
                    self._write(full, entry)
            with self._lock:
                self._mem[full] = kernel
                self._key_locks.pop(full, None)
            return kernel

    def _count(self, name, n=1):
        with self._lock:
            self.stats[name] += n

    def _load(self, key, argtypes):
        path = self.path_for(key)
        try:
            with open(path, "rb") as f:
                why = _bad_owner_or_mode(os.fstat(f.fileno()), "entry")
                if why is not None:
                    _warn(f"kernel cache entry {path} is not loaded: {why}")
                    return None
                data = f.read()
        except OSError:
            return None
        try:
            entry = decode_entry(data, key)
            kernel = self.load_fn(entry, argtypes)
        except Exception:  # corrupt file, or an image this driver refuses: recompile and rewrite
            self._count("corrupt")
            _remove(path)
            return None
        try:
            os.utime(path, None)  # LRU: a hit makes the entry young again
        except OSError:
            pass
        return kernel

    def _write(self, key, entry):
        path = self.path_for(key)
        try:
            os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
            if not self.trusted():
                return
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=SUFFIX, dir=os.path.dirname(path))
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(encode_entry(entry))
                os.replace(tmp, path)
            except BaseException:
                _remove(tmp)
                raise
        except OSError:
            return  # a read-only or full cache directory only costs the next process a compile
        self._count("writes")
        self.cleanup(keep=path)

    def cleanup(self, keep=None):
        """Delete least recently used entries until the directory holds at most ``max_bytes``."""
        try:
            # entries only: a ".tmp-*" file is another writer's entry in progress
            names = [n for n in os.listdir(self.directory) if n.endswith(SUFFIX) and not n.startswith(".tmp-")]
        except OSError:
            return
        files = []
        for n in names:
            p = os.path.join(self.directory, n)
            try:
                st = os.stat(p)
            except OSError:
                continue
            files.append((st.st_mtime, st.st_size, p))
        total = sum(f[1] for f in files)
        for _, size, p in sorted(files):
            if total <= self.max_bytes:
                break
            if p == keep:
                continue
            if _remove(p):
                total -= size
                self._count("evicted")

    def prewarm(self, key, build_dispatcher_fn, signature):
        """Compile for this cache's compute capability without a GPU and write the cubin entry.

        Runs where numba's real target is on (NUMBA_ENABLE_CUDASIM=0), e.g. in CI, so that a GPU
        process finds the kernel on disk and never JIT compiles it. Returns the entry's path.
        """
        argtypes = normalize_argtypes(signature)
        full = make_key(key, argtypes, self.cc)
        built = compile_cubin(build_dispatcher_fn(), argtypes, self.cc)
        self._write(full, CacheEntry(key=full, image=built["cubin"], entry_name=built["entry_name"]))
        return self.path_for(full)

    def clear_memory(self):
        """Forget the in-memory kernels (the disk entries stay)."""
        with self._lock:
            self._mem.clear()

    def __len__(self):
        return len(self._mem)


_refused = set()


def _warn(msg):
    from ... import log   # the kernels import nothing above them but the log, and only here
    from ...types import cudnnSeverity_t

    log.log(cudnnSeverity_t.CUDNN_SEV_WARNING, msg)


def _bad_owner_or_mode(st, what, ancestor=False):
    """Why a stat result is not trustworthy, or None."""
    uid = os.getuid()
    if st.st_uid != uid and not (ancestor and st.st_uid == 0):
        return f"the {what} is owned by uid {st.st_uid}, not by this user ({uid})"
    if st.st_mode & 0o022 and not (ancestor and st.st_mode & stat.S_ISVTX):
        return f"the {what} is writable by group or others (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def untrusted_reason(directory):
    """Why the cache directory ``directory`` (``<root>/<cc>``) must not be used, or None: it and its
    root (where they exist) belong to the user and are not group / other writable; every existing
    ancestor above belongs to the user or root and is not group / other writable unless sticky."""
    if not hasattr(os, "getuid"):
        return None   # no POSIX owners (Windows): nothing to check against
    path = os.path.abspath(directory)
    strict = {path, os.path.dirname(path)}
    while True:
        try:
            st = os.stat(path)
        except FileNotFoundError:
            st = None
        except OSError as e:
            return f"{path} cannot be checked ({e})"
        if st is not None:
            why = _bad_owner_or_mode(st, f"directory {path}", ancestor=path not in strict)
            if why is not None:
                return why
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent


def _remove(path):
    try:
        os.remove(path)
        return True
    except OSError:
        return False


_default = None
_default_lock = threading.Lock()


def default_cache():
    """The process-wide KernelCache the engine layer uses."""
    global _default
    with _default_lock:
        if _default is None:
            _default = KernelCache()
        return _default


def get_or_compile(key, build_dispatcher_fn, signature):
    """:meth:`KernelCache.get_or_compile` on the process-wide cache."""
    return default_cache().get_or_compile(key, build_dispatcher_fn, signature)


def stats():
    """Hit / miss / write / corrupt / eviction counters of the process-wide cache."""
    return dict(default_cache().stats)
