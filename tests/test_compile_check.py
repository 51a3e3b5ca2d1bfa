"""The GPU-free compile check: toy kernels compiled for sm_90, registers / spills / local memory judged
from nvJitLink's ptxas log (in a subprocess with the simulator off when the simulator is on)."""
import pytest
from numba import cuda, float32

from ncudnn.kernels.runtime import compile_check as cc
from ncudnn.kernels.runtime.compile_check import register_compile_case
from ncudnn.platform import simulator_enabled

SIM_ON = simulator_enabled()


def axpy(a, x, y):
    i = cuda.grid(1)
    if i < y.size:
        y[i] = a * x[i] + y[i]


@cuda.jit
def local_table(x, idx):
    """A dynamically indexed local array: lives in local memory (a stack frame)."""
    buf = cuda.local.array(64, float32)
    for i in range(64):
        buf[i] = x[i]
    x[0] = buf[idx[0]]


def _make_heavy(n=40):
    """n values live across a loop: ~60 registers, so a 24-register cap must spill."""
    src = "def heavy(a, out):\n    i = cuda.grid(1)\n"
    src += "".join(f"    x{j} = a[i * {n} + {j}]\n" for j in range(n))
    src += "    for it in range(100):\n"
    src += "".join(f"        x{j} = x{j} * x{(j + 1) % n} + float32(1.0)\n" for j in range(n))
    src += "    out[i] = " + " + ".join(f"x{j}" for j in range(n)) + "\n"
    ns = {"cuda": cuda, "float32": float32, "__name__": __name__}
    exec(src, ns)
    return ns["heavy"]


def untypable(x):
    x[0] = "a string in a float array"


F1 = "void(float32[:])"
F2 = "void(float32[:], float32[:])"
register_compile_case("toy_axpy", cuda.jit(axpy), "void(float32, float32[:], float32[:])", max_registers=32)
register_compile_case("toy_local_no_budget", local_table, "void(float32[:], int32[:])")
register_compile_case("toy_local_budget", local_table, "void(float32[:], int32[:])", max_local_bytes=256)
# the simulator's cuda.jit has no max_registers; the check runs with the simulator off, where it has
capped = cuda.jit(_make_heavy()) if SIM_ON else cuda.jit(max_registers=24)(_make_heavy())
register_compile_case("toy_heavy_capped", capped, F2)
heavy = cuda.jit(_make_heavy())
register_compile_case("toy_heavy_over_budget", heavy, F2, max_registers=32)
register_compile_case("toy_heavy_in_budget", heavy, F2, max_registers=128)
register_compile_case("toy_untypable", untypable, F1)

TOYS = ["toy_axpy", "toy_local_no_budget", "toy_local_budget", "toy_heavy_capped", "toy_heavy_over_budget",
        "toy_heavy_in_budget", "toy_untypable"]


@pytest.fixture(scope="module")
def results():
    return {r.name: r for r in cc.run_compile_check(TOYS, jobs=2)}  # forked workers in the simulator


def test_all_toys_reported(results):
    assert sorted(results) == sorted(TOYS)


def test_small_kernel_passes_with_cubin_numbers(results):
    r = results["toy_axpy"]
    assert r.ok, r.summary()
    assert r.cubin_info and 0 < r.registers <= 32
    assert r.spill_stores == 0 and r.spill_loads == 0 and r.stack_frame == 0 and r.ptx_local_bytes == 0
    assert r.summary().startswith("ok   toy_axpy") and f"regs {r.registers:>4}" in r.summary()


def test_local_memory_against_its_budget(results):
    bad, good = results["toy_local_no_budget"], results["toy_local_budget"]
    assert not bad.ok and bad.stack_frame == 256 and bad.ptx_local_bytes == 256
    assert any("stack frame" in p for p in bad.problems)
    assert good.ok, good.summary()


def test_register_cap_spills_are_caught(results):
    r = results["toy_heavy_capped"]
    assert not r.ok and r.registers <= 24
    assert r.spill_stores > 0 and r.spill_loads > 0
    assert any("spills" in p for p in r.problems)


def test_register_budget(results):
    over, within = results["toy_heavy_over_budget"], results["toy_heavy_in_budget"]
    assert not over.ok and over.registers > 32 and over.spill_stores == 0
    assert any(f"{over.registers} registers > budget 32" in p for p in over.problems)
    assert within.ok and within.registers == over.registers


def test_compile_error_is_a_failure(results):
    r = results["toy_untypable"]
    assert not r.ok and r.problems[0].startswith("compile failed: TypingError")


def test_unknown_case_name():
    with pytest.raises(KeyError):
        cc.run_compile_check(["no_such_case"])


def test_registry_keeps_budgets():
    case = cc.registered_cases()["toy_local_budget"]
    assert case.max_local_bytes == 256 and case.max_registers == 255 and case.signature.startswith("void(")
    assert case.file.endswith("test_compile_check.py")


LOG = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z4kern' for 'sm_90'
ptxas info    : Function properties for _Z4kern
ptxas         .     448 bytes stack frame, 1084 bytes spill stores, 1100 bytes spill loads
ptxas info    : Used 24 registers, used 1 barriers, 4096 bytes smem, 400 bytes cmem[0]
ptxas info    : Function properties for _Z6helper
ptxas         .     16 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads
info    : used 24 registers, used 5 barriers, 448 stack, 0 bytes smem, 640 bytes cmem[0], 0 bytes lmem
\x00"""


def test_parse_ptxas_log():
    f = cc.parse_ptxas_log(LOG)
    assert f["_Z4kern"] == {"stack_frame": 448, "spill_stores": 1084, "spill_loads": 1100, "registers": 24,
                            "shared_bytes": 4096}
    assert f["_Z6helper"] == {"stack_frame": 16, "spill_stores": 8, "spill_loads": 8}


def test_ptx_local_bytes():
    ptx = "\t.local .align 16 .b8 \t__local_depot0[256];\n\t.local .align 4 .b8 \t__local_depot1[12];\n" \
          "\tst.local.f32 \t[%rd2], %f1;\n"
    assert cc.ptx_local_bytes(ptx) == 268
    assert cc.ptx_local_bytes("\tld.global.f32 %f1, [%rd1];\n") == 0
