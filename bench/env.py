"""Provenance of a benchmark run: versions, device, clocks, commit, command and date."""
import datetime
import os
import platform
import re
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: dense peak throughput (TFLOP/s) by math and HBM bandwidth (TB/s) from NVIDIA's datasheets (SXM parts)
SPEC_PEAKS = {
    "H200": {"float32": 67.0, "tf32": 494.7, "bfloat16": 989.4, "float16": 989.4, "hbm_tbps": 4.8,
             "source": "NVIDIA H200 Tensor Core GPU datasheet (SXM, dense)"},
    "H100": {"float32": 67.0, "tf32": 494.7, "bfloat16": 989.4, "float16": 989.4, "hbm_tbps": 3.35,
             "source": "NVIDIA H100 Tensor Core GPU datasheet (SXM, dense)"},
}


def _version(dist):
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _run(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=20, cwd=ROOT).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def git_commit():
    """The checkout's commit; ``NCUDNN_GIT_COMMIT`` wins (a copied tree can carry stale git metadata:
    tools/gpu_env.sh sets it from the .gpustate/commit file written before a device call)."""
    given = os.environ.get("NCUDNN_GIT_COMMIT")
    if given:
        return {"commit": given, "dirty": False, "source": "NCUDNN_GIT_COMMIT"}
    sha = _run(["git", "rev-parse", "HEAD"])
    dirty = bool(_run(["git", "status", "--porcelain", "--untracked-files=no"]))
    return {"commit": sha or None, "dirty": dirty}


def nvidia_smi():
    """Clocks and driver from nvidia-smi, or None when it is not there."""
    if not shutil.which("nvidia-smi"):
        return None
    fields = ("name", "driver_version", "clocks.sm", "clocks.mem", "clocks.max.sm", "clocks.max.mem",
              "power.limit", "temperature.gpu", "persistence_mode")
    out = _run(["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader"])
    if not out:
        return None
    vals = [v.strip() for v in out.splitlines()[0].split(",")]
    return dict(zip(fields, vals))


def torch_info():
    try:
        import torch
    except ImportError:
        return None
    info = {"torch": torch.__version__, "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None}
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(torch.cuda.current_device())
        info.update(device=p.name, sm_count=p.multi_processor_count, cc=[p.major, p.minor],
                    memory_gb=round(p.total_memory / 1e9, 1), l2_bytes=getattr(p, "L2_cache_size", None))
    return info


def cudnn_fe_info():
    try:
        import cudnn
    except Exception as e:
        return {"available": False, "why": f"{type(e).__name__}: {e}"[:200]}
    try:
        backend = cudnn.backend_version()
    except Exception as e:
        backend = f"unknown ({type(e).__name__})"
    return {"available": True, "version": _version("nvidia-cudnn-frontend") or getattr(cudnn, "__version__", None),
            "backend_version": backend}


def provenance(simulator, argv=None):
    from ncudnn.version import __version__

    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join(argv if argv is not None else sys.argv),
        "host": platform.node(),
        "python": platform.python_version(),
        "simulator": simulator,
        "git": git_commit(),
        "versions": {"ncudnn": __version__, "numba": _version("numba"), "numba-cuda": _version("numba-cuda"),
                     "numpy": _version("numpy"), "cuda-python": _version("cuda-python"),
                     "cuda-bindings": _version("cuda-bindings")},
        "torch": torch_info(),
        "cudnn_frontend": cudnn_fe_info(),
        "nvidia_smi": nvidia_smi(),
        "env": {k: os.environ[k] for k in ("CUDA_VISIBLE_DEVICES", "NCUDNN_CACHE_DIR") if k in os.environ},
    }


def device_name(prov):
    t, smi = prov.get("torch") or {}, prov.get("nvidia_smi") or {}
    if prov.get("simulator"):
        return "simulator"
    return t.get("device") or smi.get("name") or "unknown-gpu"


def slug(name):
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "unknown"


def spec_peaks(name):
    for key, peaks in SPEC_PEAKS.items():
        if key.lower() in name.lower():
            return dict(peaks)
    return None


def copy_bandwidth_tbps():
    """Measured device-to-device copy bandwidth (read + write bytes per second), TB/s, via torch."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    n = 1 << 30
    a = torch.empty(n, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    for _ in range(3):
        b.copy_(a)
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(10):
        e0.record()
        b.copy_(a)
        e1.record()
        e1.synchronize()
        times.append(e0.elapsed_time(e1))
    times.sort()
    del a, b
    return 2 * n / (times[len(times) // 2] * 1e-3) / 1e12
