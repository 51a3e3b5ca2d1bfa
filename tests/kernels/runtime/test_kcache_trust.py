"""Kernel cache trust: a cache entry is GPU code the process runs, so a cache directory anyone else can
write (group / other writable, or not the user's) is refused and logged, the cache then working in
memory only; an entry file writable by others is not loaded; and the size-cap cleanup never deletes
another writer's in-progress ``.tmp-*`` file. The GPU pieces are faked (test_kcache.FakeGPU)."""
import os

import numpy as np
import pytest

from ncudnn import log
from ncudnn.kernels.runtime import kcache
from ncudnn.kernels.runtime.kcache import make_key

from test_kcache import SIG, FakeGPU, _cache, _close, _never, _run, make_scale_kernel

pytestmark = pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX owners and modes")


@pytest.fixture
def warnings(monkeypatch):
    seen = []
    orig = log.log
    monkeypatch.setattr(log, "log", lambda sev, msg, *a, **k: (seen.append(msg), orig(sev, msg, *a, **k)))
    monkeypatch.setattr(kcache, "_refused", set())
    return seen


def _warm(tmp_path, fake, bias):
    cold = _cache(tmp_path, fake)
    cold.get_or_compile("scale", lambda: make_scale_kernel(np.float32(bias)), SIG)
    return cold.path_for(make_key("scale", SIG, "sm_90"))


@pytest.mark.parametrize("where", ["root", "cc"])
@pytest.mark.parametrize("mode", [0o777, 0o770, 0o722])
def test_group_or_other_writable_directory_is_refused(tmp_path, rng, warnings, where, mode):
    fake = FakeGPU(rng)
    root = tmp_path / "cache"
    root.mkdir(mode=0o700)
    path = _warm(root, fake, 2.0)
    planted = b"an attacker's cubin"
    open(path, "wb").write(planted)          # whoever can write the directory chooses the entry
    os.chmod(root if where == "root" else root / "sm_90", mode)
    cache = _cache(root, fake)
    built = []
    k = cache.get_or_compile("scale", lambda: built.append(1) or make_scale_kernel(np.float32(3.0)), SIG)
    assert built == [1] and cache.stats["disk_hits"] == 0 and not fake.loaded
    assert open(path, "rb").read() == planted, "nothing is written into an untrusted directory"
    assert any("not used" in w and "writable by group or others" in w for w in warnings)
    x = rng.uniform(-1, 1, 8).astype(np.float32)
    _close(_run(k, x, 2.0), x * np.float32(2.0) + 3.0)
    n = len(warnings)
    _cache(root, fake).get_or_compile("scale4", lambda: make_scale_kernel(np.float32(4.0)), SIG)
    assert len(warnings) == n, "a refused directory is logged once"


def test_directory_of_another_owner_is_refused(tmp_path, rng, warnings, monkeypatch):
    fake = FakeGPU(rng)
    _warm(tmp_path, fake, 2.0)
    monkeypatch.setattr(os, "getuid", lambda: os.stat(tmp_path).st_uid + 1)   # as if another user ran
    cache = _cache(tmp_path, fake)
    cache.get_or_compile("scale", lambda: make_scale_kernel(np.float32(2.0)), SIG)
    assert cache.stats["disk_hits"] == 0 and not fake.loaded
    assert any("owned by uid" in w for w in warnings)


def test_other_writable_entry_is_not_loaded(tmp_path, rng, warnings):
    fake = FakeGPU(rng)
    path = _warm(tmp_path, fake, 2.0)
    os.chmod(path, 0o666)
    cache = _cache(tmp_path, fake)
    cache.get_or_compile("scale", lambda: make_scale_kernel(np.float32(2.0)), SIG)
    assert cache.stats["disk_hits"] == 0 and not fake.loaded
    assert any("entry" in w and "writable by group or others" in w for w in warnings)


def test_private_directory_is_trusted(tmp_path, rng, warnings):
    fake = FakeGPU(rng)
    root = tmp_path / "c"
    root.mkdir(mode=0o700)
    _warm(root, fake, 5.0)
    assert oct(os.stat(root / "sm_90").st_mode & 0o077) == "0o0"
    warm = _cache(root, fake)
    k = warm.get_or_compile("scale", _never, SIG)
    assert warm.stats["disk_hits"] == 1 and not warnings
    x = rng.uniform(-1, 1, 8).astype(np.float32)
    _close(_run(k, x, 2.0), x * np.float32(2.0) + 5.0)
    assert kcache.untrusted_reason(str(root / "sm_90")) is None
    assert kcache.untrusted_reason(str(root / "not" / "made" / "yet")) is None


def test_cleanup_keeps_other_writers_temp_files(tmp_path, rng):
    fake = FakeGPU(rng)
    cache = _cache(tmp_path, fake, max_bytes=1)   # every entry is over the cap
    path = _warm(tmp_path, fake, 1.0)
    d = os.path.dirname(path)
    tmp = os.path.join(d, ".tmp-otherwriter" + kcache.SUFFIX)
    open(tmp, "wb").write(b"x" * 4096)
    os.utime(tmp, (1, 1))   # the oldest file in the directory
    cache.get_or_compile("scale2", lambda: make_scale_kernel(np.float32(2.0)), SIG)
    cache.cleanup()
    assert os.path.exists(tmp), "the cleanup deleted another writer's temp file"
    assert cache.stats["evicted"] >= 1
