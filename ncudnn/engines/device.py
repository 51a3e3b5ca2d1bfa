"""Device properties for the cost model: what the heuristics weigh FLOPs and bytes against.

:func:`current` returns the properties of the current CUDA device, read once through numba's device
attributes; under the simulator (or when no device can be queried) a nominal H200 flagged
``nominal=True``. Peak arithmetic rates come from a small table of known parts by name, else from
the SM count and clock (FP32: 128 lanes x 2 FLOP per SM per clock on sm_80+; 64 before).
"""
from dataclasses import asdict, astuple, dataclass
from functools import cached_property

from ..platform import simulator_enabled


@dataclass(frozen=True)
class DeviceProps:
    name: str
    cc: tuple                 # (major, minor)
    sm_count: int
    clock_hz: float           # SM clock
    mem_bandwidth: float      # bytes / s
    peak_fp32: float          # FLOP / s (FMA = 2)
    peak_tf32: float          # dense tensor-core rates
    peak_bf16: float
    smem_per_sm: int          # bytes
    smem_per_block: int       # bytes (opt-in maximum)
    regs_per_sm: int
    max_threads_per_sm: int
    l2_bytes: int
    nominal: bool = False     # True: not measured from a device (simulator / query failed)

    def __hash__(self):  # memo keys hash this often: compute once (the dataclass is frozen)
        h = self.__dict__.get("_hash")
        if h is None:
            h = self.__dict__["_hash"] = hash(astuple(self))
        return h

    @cached_property
    def slug(self):
        """A file-name-safe id: name and compute capability."""
        safe = "_".join("".join(c if c.isalnum() else " " for c in self.name).split())
        return f"{safe}_sm{self.cc[0]}{self.cc[1]}"

    def peak(self, kind):
        """Peak FLOP/s for "fp32", "tf32", "bf16" / "fp16" (tensor-core dense), "fp64"."""
        if kind in ("bf16", "fp16", "half"):
            return self.peak_bf16
        if kind == "tf32":
            return self.peak_tf32
        if kind == "fp64":
            return self.peak_fp32 / (2 if tuple(self.cc) in _FULL_FP64 else 32)
        return self.peak_fp32

    def to_json(self):
        d = asdict(self)
        d["cc"] = list(self.cc)
        d.pop("slug", None)
        return d


_FULL_FP64 = {(6, 0), (7, 0), (8, 0), (9, 0), (10, 0)}  # datacenter parts with half-rate FP64

#: nominal H200 SXM (sm_90): 132 SMs, 4.8 TB/s HBM3e, 67 TFLOP/s FP32, 495 TF32, 989 BF16 (dense)
H200 = DeviceProps(
    name="NVIDIA H200 (nominal)", cc=(9, 0), sm_count=132, clock_hz=1.98e9, mem_bandwidth=4.8e12,
    peak_fp32=67e12, peak_tf32=495e12, peak_bf16=989e12, smem_per_sm=228 * 1024,
    smem_per_block=227 * 1024, regs_per_sm=65536, max_threads_per_sm=2048, l2_bytes=50 * 1024 * 1024,
    nominal=True)

# Published dense peaks (FLOP/s) and HBM bandwidth (bytes/s) of parts whose clocks the driver misreports
# for our purpose (boost vs base); matched by substring of the device name.
_KNOWN = {
    "H200": dict(mem_bandwidth=4.8e12, peak_fp32=67e12, peak_tf32=495e12, peak_bf16=989e12),
    "H100": dict(mem_bandwidth=3.35e12, peak_fp32=67e12, peak_tf32=495e12, peak_bf16=989e12),
    "A100": dict(mem_bandwidth=2.0e12, peak_fp32=19.5e12, peak_tf32=156e12, peak_bf16=312e12),
}

_current = None


def current():
    """Properties of the current device (cached), or the nominal H200 under the simulator."""
    global _current
    if _current is None:
        _current = H200 if simulator_enabled() else (_query() or H200)
    return _current


def _query():
    try:
        from numba import cuda

        dev = cuda.get_current_device()
        a = lambda n, d=0: int(getattr(dev, n, d) or d)  # noqa: E731
        name = dev.name.decode() if isinstance(dev.name, bytes) else str(dev.name)
        cc = tuple(dev.compute_capability)
        sms = a("MULTIPROCESSOR_COUNT", 1)
        clock = a("CLOCK_RATE", 1_000_000) * 1e3
        mem_clock = a("MEMORY_CLOCK_RATE", 1_000_000) * 1e3
        bus = a("GLOBAL_MEMORY_BUS_WIDTH", 256)
        lanes = 128 if cc[0] >= 8 and cc != (8, 0) else 64
        fp32 = sms * lanes * 2 * clock
        props = dict(
            name=name, cc=cc, sm_count=sms, clock_hz=clock, mem_bandwidth=2 * mem_clock * bus / 8,
            peak_fp32=fp32, peak_tf32=fp32 * (8 if cc[0] >= 8 else 1), peak_bf16=fp32 * (16 if cc[0] >= 8 else 2),
            smem_per_sm=a("MAX_SHARED_MEMORY_PER_MULTIPROCESSOR", 48 * 1024),
            smem_per_block=a("MAX_SHARED_MEMORY_PER_BLOCK_OPTIN", 48 * 1024),
            regs_per_sm=a("MAX_REGISTERS_PER_MULTIPROCESSOR", 65536),
            max_threads_per_sm=a("MAX_THREADS_PER_MULTI_PROCESSOR", 2048),
            l2_bytes=a("L2_CACHE_SIZE", 4 * 1024 * 1024))
        for part, known in _KNOWN.items():
            if part in name:
                props.update(known)
                break
        return DeviceProps(**props)
    except Exception:
        return None


def set_current(props):
    """Override the device the cost model sees (tests, what-if ranking); None re-queries."""
    global _current
    _current = props
