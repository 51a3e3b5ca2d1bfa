"""Kernel cache: memory semantics, key stability, the disk layer (GPU pieces faked), LRU cap, and the
GPU-less sm_90 compile with its resource report."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from numba import cuda

from ncudnn.kernels.runtime import kcache
from ncudnn.kernels.runtime.kcache import CacheEntry, KernelCache, decode_entry, encode_entry, make_key
from ncudnn.kernels.runtime.launch import CompiledKernel
from ncudnn.testing import random

SIG = "void(float32[::1], float32[::1], float32)"


def make_scale_kernel(bias):
    """A kernel factory: the closure constant makes every kernel distinct (numba cannot disk-cache it)."""
    @cuda.jit
    def scale(x, out, a):
        i = cuda.grid(1)
        if i < x.shape[0]:
            out[i] = x[i] * a + bias
    return scale


def _close(got, want):
    """x * a + b: the GPU fuses it (one rounding), NumPy rounds twice: compare near zero absolutely."""
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def _run(kernel, x, a):
    out = cuda.to_device(np.full(x.shape, np.nan, np.float32))
    kernel.prepare(1, x.shape[0], (cuda.to_device(x), out, np.float32(a))).run()
    return out.copy_to_host()


def test_memory_cache_semantics(rng, tmp_path):
    cache = KernelCache(directory=str(tmp_path))
    assert cache.disk == (not kcache.SIM)  # the simulator has no cubin: memory only
    built = []

    def build(b):
        def fn():
            built.append(b)
            return make_scale_kernel(np.float32(b))
        return fn

    k1 = cache.get_or_compile("scale/bias=1", build(1.0), SIG)
    k1b = cache.get_or_compile("scale/bias=1", build(1.0), SIG)
    k2 = cache.get_or_compile("scale/bias=2", build(2.0), SIG)
    k1c = cache.get_or_compile("scale/bias=1", build(1.0), "void(float32[:], float32[::1], float32)")
    assert k1 is k1b and k1 is not k2 and k1c is not k1
    assert built == [1.0, 2.0, 1.0]
    assert cache.stats["memory_hits"] == 1 and cache.stats["misses"] == 3
    x = random(rng, 8)
    _close(_run(k2, x, 3.0), x * np.float32(3.0) + 2.0)


def test_key_is_stable_across_processes():
    key = make_key("gemm/BLOCK_M=64", SIG, "sm_90")
    assert key == make_key("gemm/BLOCK_M=64", (kcache.normalize_argtypes(SIG)), "sm_90")
    parts = json.loads(key)
    assert parts[0] == "gemm/BLOCK_M=64" and parts[2] == "sm_90" and parts[3:] == list(kcache.versions())
    code = ("from ncudnn.kernels.runtime import kcache;"
            f"print(kcache.key_digest(kcache.make_key('gemm/BLOCK_M=64', {SIG!r}, 'sm_90')))")
    env = dict(os.environ, PYTHONHASHSEED=str(hash("x") % 1000 + 1))  # another hash seed
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == kcache.key_digest(key)
    assert make_key("gemm/BLOCK_M=128", SIG, "sm_90") != key
    assert make_key("gemm/BLOCK_M=64", SIG, "sm_80") != key


class FakeGPU:
    """compile_fn / load_fn standing in for numba + the driver: the 'cubin' names the kernel's bias."""

    def __init__(self, rng):
        self.rng, self.loaded, self.fail_load = rng, [], False

    def compile(self, build, argtypes):
        disp = build()
        kernel = CompiledKernel(disp, argtypes)
        bias = float(disp.py_func.__closure__[0].cell_contents)
        image = json.dumps({"bias": bias}).encode() + self.rng.bytes(int(self.rng.integers(100, 400)))
        return kernel, CacheEntry(key="", image=image, entry_name="_Z5scale", attrs={"regs": 12})

    def load(self, entry, argtypes):
        if self.fail_load:
            raise RuntimeError("CUDA_ERROR_INVALID_IMAGE")
        self.loaded.append(entry)
        bias = json.loads(entry.image[:entry.image.index(b"}") + 1])["bias"]
        return CompiledKernel(make_scale_kernel(np.float32(bias)), argtypes)


def _cache(tmp_path, fake, **kw):
    return KernelCache(directory=str(tmp_path), disk=True, compile_fn=fake.compile, load_fn=fake.load,
                       cc="sm_90", **kw)


def _never():
    raise AssertionError("build_dispatcher_fn called on a warm start")


def test_disk_roundtrip_and_warm_start(tmp_path, rng):
    fake = FakeGPU(rng)
    cold = _cache(tmp_path, fake)
    bias = float(rng.integers(1, 9))
    k = cold.get_or_compile("scale", lambda: make_scale_kernel(np.float32(bias)), SIG)
    path = cold.path_for(make_key("scale", SIG, "sm_90"))
    assert os.path.dirname(path) == str(tmp_path / "sm_90")
    assert cold.stats["writes"] == 1 and os.path.exists(path)
    assert not [n for n in os.listdir(tmp_path / "sm_90") if n.startswith(".tmp-")]

    warm = _cache(tmp_path, fake)  # a new process: nothing in memory
    k2 = warm.get_or_compile("scale", _never, SIG)
    assert warm.stats["disk_hits"] == 1 and warm.stats["misses"] == 0
    assert fake.loaded[0].entry_name == "_Z5scale" and fake.loaded[0].attrs == {"regs": 12}
    x = random(rng, 8)
    np.testing.assert_array_equal(_run(k2, x, 2.0), _run(k, x, 2.0))
    _close(_run(k2, x, 2.0), x * np.float32(2.0) + bias)
    assert warm.get_or_compile("scale", _never, SIG) is k2 and warm.stats["memory_hits"] == 1


@pytest.mark.parametrize("damage", ["garbage", "truncated", "other_key", "flipped", "load_fails"])
def test_corrupt_entries_are_ignored_and_rewritten(tmp_path, rng, damage):
    fake = FakeGPU(rng)
    build = lambda: make_scale_kernel(np.float32(3.0))  # noqa: E731
    first = _cache(tmp_path, fake)
    first.get_or_compile("scale", build, SIG)
    path = first.path_for(make_key("scale", SIG, "sm_90"))
    data = open(path, "rb").read()
    if damage == "garbage":
        data = rng.bytes(len(data))
    elif damage == "truncated":
        data = data[: len(data) - 7]
    elif damage == "other_key":
        first.get_or_compile("scale2", lambda: make_scale_kernel(np.float32(4.0)), SIG)
        data = open(first.path_for(make_key("scale2", SIG, "sm_90")), "rb").read()
    elif damage == "flipped":
        data = data[:-1] + bytes([data[-1] ^ 0xFF])
    with open(path, "wb") as f:
        f.write(data)
    fake.fail_load = damage == "load_fails"

    again = _cache(tmp_path, fake)
    k = again.get_or_compile("scale", build, SIG)
    assert again.stats["corrupt"] == 1 and again.stats["misses"] == 1 and again.stats["writes"] == 1
    entry = decode_entry(open(path, "rb").read(), make_key("scale", SIG, "sm_90"))  # rewritten whole
    assert entry.entry_name == "_Z5scale"
    x = random(rng, 8)
    _close(_run(k, x, 1.0), x + 3.0)


def test_decode_rejects(rng):
    e = CacheEntry(key="k", image=rng.bytes(64), entry_name="f", attrs={"regs": 3})
    blob = encode_entry(e)
    assert decode_entry(blob, "k").image == e.image
    for bad in (blob[:10], b"x" + blob[1:], blob + b"!"):
        with pytest.raises(kcache.CorruptEntry):
            decode_entry(bad, "k")
    with pytest.raises(kcache.CorruptEntry):
        decode_entry(blob, "k2")


def test_size_cap_evicts_least_recently_used(tmp_path, rng):
    fake = FakeGPU(rng)
    cache = _cache(tmp_path, fake, max_bytes=10**9)
    paths = []
    for i in range(5):
        cache.get_or_compile(f"k{i}", lambda i=i: make_scale_kernel(np.float32(i)), SIG)
        p = cache.path_for(make_key(f"k{i}", SIG, "sm_90"))
        os.utime(p, (1000 + i, 1000 + i))  # k0 oldest ... k4 newest
        paths.append(p)
    sizes = [os.path.getsize(p) for p in paths]
    # a warm hit on k0 from another process makes it the youngest
    other = _cache(tmp_path, fake)
    other.get_or_compile("k0", _never, SIG)
    assert os.path.getmtime(paths[0]) > 1004
    cache.max_bytes = sizes[0] + sizes[4] + sizes[3]
    cache.cleanup()
    left = [os.path.exists(p) for p in paths]
    assert left == [True, False, False, True, True]
    assert cache.stats["evicted"] == 2


def test_default_directory(monkeypatch, tmp_path):
    monkeypatch.setenv("NCUDNN_CACHE_DIR", str(tmp_path))
    assert KernelCache(cc="sm_90").directory == os.path.join(str(tmp_path), "sm_90")
    monkeypatch.delenv("NCUDNN_CACHE_DIR")
    assert KernelCache(cc="sm_90").directory.endswith(os.path.join(".cache", "ncudnn", "kernels", "sm_90"))


def test_module_level_get_or_compile(rng):
    before = kcache.stats()
    k = kcache.get_or_compile("test_kcache/module-level", lambda: make_scale_kernel(np.float32(5)), SIG)
    assert kcache.get_or_compile("test_kcache/module-level", _never, SIG) is k
    after = kcache.stats()
    assert after["memory_hits"] == before["memory_hits"] + 1
    x = random(rng, 4)
    _close(_run(k, x, 1.0), x + 5.0)


# ------------------------------------------------------------------ GPU-less compile for sm_90

def make_resource_kernel(n_local, n_shared):
    """Factory for the resource check: a dynamically indexed local array and a static shared array."""
    from numba import float32

    @cuda.jit
    def k(x, y, n):
        loc = cuda.local.array(n_local, float32)
        sm = cuda.shared.array(n_shared, float32)
        i = cuda.grid(1)
        for j in range(n_local):
            loc[j] = x[(i + j) % n]
        sm[cuda.threadIdx.x % n_shared] = loc[i % n_local]
        cuda.syncthreads()
        if i < n:
            y[i] = sm[(cuda.threadIdx.x + 1) % n_shared] + loc[(i * 7) % n_local]
    return k


def test_resource_usage_sm90_without_gpu(monkeypatch, rng):
    here = os.path.dirname(__file__)
    monkeypatch.setenv("PYTHONPATH", here + os.pathsep + os.environ.get("PYTHONPATH", ""))
    n_local, n_shared = int(rng.integers(32, 96)), int(rng.choice([128, 256, 512]))
    r = kcache.resource_usage_subprocess("test_kcache:make_resource_kernel",
                                         "void(float32[::1], float32[::1], int64)",
                                         args=(n_local, n_shared), cc=(9, 0))
    assert r["source"] == "nvjitlink" and r["entry_name"]
    assert 8 <= r["registers"] <= 255
    # sm_90 static shared memory as ptxas reports it includes the 1 KB reserved per block
    assert 4 * n_shared <= r["shared"] <= 4 * n_shared + 1024
    assert r["stack_frame"] >= 4 * n_local and r["spill_stores"] == 0 and r["spill_loads"] == 0
    assert r["barriers"] == 1 and r["const"] > 0


CUBIN_VS_LOG = r'''
import json, os, sys
sys.path.insert(0, os.environ["HERE"])
from ncudnn.kernels.runtime import kcache
from test_kcache import make_resource_kernel
out = []
for n_local, n_shared in json.loads(sys.argv[1]):
    sig = "void(float32[::1], float32[::1], int64)"
    b = kcache.compile_cubin(make_resource_kernel(n_local, n_shared), sig, "sm_90")
    out.append(dict(elf=kcache.cubin_resources(b["cubin"], b["entry_name"]),
                    log=kcache.parse_link_log(b["log"])[b["entry_name"]], magic=b["cubin"][:4].hex()))
print("CMP " + json.dumps(out))
'''


def test_cubin_parse_agrees_with_ptxas_log(rng):
    sizes = [(int(rng.integers(16, 40)), 64), (int(rng.integers(48, 96)), int(rng.choice([256, 512])))]
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0", HERE=os.path.dirname(__file__))
    p = subprocess.run([sys.executable, "-c", CUBIN_VS_LOG, json.dumps(sizes)], capture_output=True,
                       text=True, env=env, timeout=300)
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("CMP ")]
    assert line, p.stderr[-3000:]
    rs = json.loads(line[0][4:])
    for r, (n_local, _) in zip(rs, sizes):
        assert r["magic"] == "7f454c46"
        for k in ("registers", "stack_frame", "shared", "const"):
            assert r["elf"][k] == r["log"][k], k
        assert r["elf"]["stack_frame"] >= 4 * n_local
    # static shared memory grows exactly with the declared shared array
    assert rs[1]["elf"]["shared"] - rs[0]["elf"]["shared"] == 4 * (sizes[1][1] - sizes[0][1])


@pytest.mark.skipif(not kcache.SIM, reason="simulator refusal only")
def test_compile_cubin_refused_in_simulator():
    with pytest.raises(RuntimeError, match="NUMBA_ENABLE_CUDASIM=0"):
        kcache.compile_cubin(make_resource_kernel(4, 32), "void(float32[::1], float32[::1], int64)")


def test_concurrent_callers_compile_once(tmp_path, rng):
    import threading

    fake = FakeGPU(rng)
    cache = _cache(tmp_path, fake)
    built, got = [], []

    def build():
        built.append(1)
        return make_scale_kernel(np.float32(6.0))

    def worker():
        got.append(cache.get_or_compile("shared-key", build, SIG))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(built) == 1 and len(got) == 8 and all(k is got[0] for k in got)
    assert cache.stats["misses"] == 1 and cache.stats["memory_hits"] == 7 and cache.stats["writes"] == 1


PREWARM = r'''
import os, sys
import numpy as np
sys.path.insert(0, os.environ["HERE"])
from ncudnn.kernels.runtime.kcache import KernelCache
from test_kcache import SIG, make_scale_kernel
print("PATH " + KernelCache(directory=sys.argv[1], cc="sm_90").prewarm(
    "scale", lambda: make_scale_kernel(np.float32(2.0)), SIG))
'''


def test_prewarm_writes_an_sm90_cubin_without_gpu(tmp_path, rng):
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0", HERE=os.path.dirname(__file__))
    p = subprocess.run([sys.executable, "-c", PREWARM, str(tmp_path)], capture_output=True, text=True,
                       env=env, timeout=300)
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("PATH ")]
    assert line, p.stderr[-3000:]
    key = make_key("scale", SIG, "sm_90")
    path = line[0][5:]
    assert path == KernelCache(directory=str(tmp_path), cc="sm_90").path_for(key)
    entry = decode_entry(open(path, "rb").read(), key)
    assert entry.image[:4] == b"\x7fELF" and entry.kind == "cubin"
    assert kcache.cubin_resources(entry.image, entry.entry_name)["registers"] > 0
    fake = FakeGPU(rng)
    fake.load = lambda e, argtypes: CompiledKernel(make_scale_kernel(np.float32(2.0)), argtypes)
    warm = _cache(tmp_path, fake)
    k = warm.get_or_compile("scale", _never, SIG)
    assert warm.stats["disk_hits"] == 1
    x = random(rng, 8)
    _close(_run(k, x, 1.5), x * np.float32(1.5) + 2.0)
