"""GPU probe of wgmma operand encodings: one warpgroup, one block, known random bf16 / f16 / tf32 inputs
staged in shared memory under several candidate layouts / descriptor encodings, compared with a float64
oracle (tf32: of the truncated inputs; the errors against round-to-nearest and exact FP32 inputs printed).

``python experiments/probe_wgmma.py`` runs every variant (``--only tf32``: the TF32 ones), each worker process
restarted after a fault so one bad encoding does not hide the others; prints one line per variant (PASS /
FAIL, max error, wrong count) and, for a failure, the first wrong elements with where in the oracle the
value actually lives.
``--list`` names the variants; ``--only NAME[,NAME]`` runs some. Needs an sm_90 GPU.
"""
import argparse
import os
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from ncudnn.kernels.wgmma import layout as L  # noqa: E402

# --------------------------------------------------------------------------------- variants
# Each variant: n, K, dtype, trans_a, trans_b, and per operand (layout, lbo, sbo, swizzle, k16 step bytes).
# Layout names: "ki" K-major interleaved (k cores contiguous, 128 B apart; row groups KC*128 apart),
# "ks" K-major 128B swizzle (64-element rows), "ms" MN-major 128B swizzle (rows k, panels of 64 mn),
# "mi" MN-major interleaved (core = 8 k rows x 8 mn; k cores 128 B apart, mn groups KC*128 apart).


def _ops(kind, K, rows, swap=False, esz=2):
    KC = K * esz // 16          # 16-byte core-matrix columns along k
    if kind == "ki":
        lbo, sbo = 128, KC * 128
        return dict(kind=kind, lbo=sbo if swap else lbo, sbo=lbo if swap else sbo, swz=0, step=256)
    if kind == "ks":
        return dict(kind=kind, lbo=16, sbo=1024, swz=1, step=32)
    if kind == "ms":   # LBO = mn panel stride, SBO = 8-k-row group stride (swap: the other way)
        lbo, sbo = K * 128, 1024
        return dict(kind=kind, lbo=sbo if swap else lbo, sbo=lbo if swap else sbo, swz=1, step=2048)
    if kind == "mi":   # LBO = k core stride, SBO = mn group stride (swap: the other way)
        lbo, sbo = 128, KC * 128
        return dict(kind=kind, lbo=sbo if swap else lbo, sbo=lbo if swap else sbo, swz=0, step=256)
    raise ValueError(kind)


def _v(name, n, K, a, b, dtype="bf16", a_swap=False, b_swap=False):
    esz = 4 if dtype == "tf32" else 2
    return dict(name=name, n=n, K=K, dtype=dtype, ta=a.startswith("m"), tb=b.startswith("m"),
                A=_ops(a, K, 64, a_swap, esz), B=_ops(b, K, n, b_swap, esz))


VARIANTS = [
    _v("ki_ki_n8_k16_lboK", 8, 16, "ki", "ki"),
    _v("ki_ki_n8_k16_lboMN", 8, 16, "ki", "ki", a_swap=True, b_swap=True),
    _v("ki_ki_n64_k64_lboK", 64, 64, "ki", "ki"),
    _v("ki_ki_n64_k64_lboMN", 64, 64, "ki", "ki", a_swap=True, b_swap=True),
    _v("ks_ks_n8_k64", 8, 64, "ks", "ks"),
    _v("ks_ks_n64_k64", 64, 64, "ks", "ks"),
    _v("ks_ks_n128_k64", 128, 64, "ks", "ks"),
    _v("ks_ks_n256_k64", 256, 64, "ks", "ks"),
    _v("ks_ks_n128_k64_f16", 128, 64, "ks", "ks", "f16"),
    _v("ks_ms_n64_k64", 64, 64, "ks", "ms"),
    _v("ks_ms_n128_k64_lboMN", 128, 64, "ks", "ms"),
    _v("ks_ms_n128_k64_lboK", 128, 64, "ks", "ms", b_swap=True),
    _v("ks_ms_n256_k64_lboMN", 256, 64, "ks", "ms"),
    _v("ks_ms_n256_k64_lboK", 256, 64, "ks", "ms", b_swap=True),
    _v("ms_ks_n128_k64", 128, 64, "ms", "ks"),
    _v("ki_mi_n64_k64_lboK", 64, 64, "ki", "mi"),
    _v("ki_mi_n64_k64_lboMN", 64, 64, "ki", "mi", b_swap=True),
    # TF32 (m64nNk8, 4-byte elements, K-major only): a 128-byte swizzled row holds 32 k, a k8 step is 32 bytes
    _v("tf32_ks_ks_n64_k32", 64, 32, "ks", "ks", "tf32"),
    _v("tf32_ks_ks_n128_k32", 128, 32, "ks", "ks", "tf32"),
    _v("tf32_ks_ks_n256_k32", 256, 32, "ks", "ks", "tf32"),
    _v("tf32_ki_ki_n64_k32_lboK", 64, 32, "ki", "ki", "tf32"),
]
TF32 = [v["name"] for v in VARIANTS if v["dtype"] == "tf32"]


def _offset(op, K, row, k, esz=2):
    """Byte offset of element (row = m or n, k) of an operand in its image (``esz`` bytes per element;
    4-byte elements: K-major layouts only, 4 to a 16-byte chunk)."""
    kind = op["kind"]
    KC = K * esz // 16
    if esz == 4:
        if kind == "ks":
            return row * 128 + L.sw128_chunk(row, k >> 2) * 16 + (k & 3) * 4
        if kind == "ki":
            return (row >> 3) * KC * 128 + (k >> 2) * 128 + (row & 7) * 16 + (k & 3) * 4
        raise ValueError(f"{kind}: 4-byte elements are K-major only")
    if kind == "ki":
        return L.kmajor_interleaved_offset(row, k, 128, KC * 128)
    if kind == "ks":
        return L.kmajor_sw128_offset(row, k)
    if kind == "ms":
        return L.mnmajor_sw128_offset(k, row, K)
    if kind == "mi":
        return (k & 7) * 16 + (row & 7) * 2 + (row >> 3) * KC * 128 + (k >> 3) * 128
    raise ValueError(kind)


def _tf32_trunc(x):
    return (np.asarray(x, np.float32).view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)


def _tf32_rna(x):
    """Round to nearest, ties away from zero, to 10 mantissa bits (cvt.rna.tf32.f32)."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x1000) & 0xFFFFE000).astype(np.uint32).view(np.float32)


def build_image(v, rng):
    """(image uint16, b_off bytes, A float64 64xK, B float64 KxN) with the operands laid out for ``v``
    (tf32: FP32 words, as stored; A / B returned as stored, unrounded)."""
    import ml_dtypes
    n, K = v["n"], v["K"]
    dt = {"bf16": ml_dtypes.bfloat16, "f16": np.float16, "tf32": np.float32}[v["dtype"]]
    esz = np.dtype(dt).itemsize
    A = rng.uniform(-1, 1, (64, K)).astype(dt)
    B = rng.uniform(-1, 1, (K, n)).astype(dt)
    a_bytes = -(-64 * K * esz // 1024) * 1024
    b_bytes = -(-n * K * esz // 1024) * 1024
    words = np.zeros((a_bytes + b_bytes) // esz, dtype=np.uint16 if esz == 2 else np.uint32)
    Au, Bu = A.view(words.dtype), B.view(words.dtype)
    for m in range(64):
        for k in range(K):
            words[_offset(v["A"], K, m, k, esz) // esz] = Au[m, k]
    for j in range(n):
        for k in range(K):
            words[(a_bytes + _offset(v["B"], K, j, k, esz)) // esz] = Bu[k, j]
    return words.view(np.uint16), a_bytes, A.astype(np.float64), B.astype(np.float64)


_KERNELS = {}


def make_kernel(n, dtype, ta, tb):
    key = (n, dtype, ta, tb)
    if key in _KERNELS:
        return _KERNELS[key]
    from numba import cuda, float32, int64, uint16

    from ncudnn.kernels.primitives import ptx
    from ncudnn.kernels.wgmma import ptx as wp
    nreg = n // 2
    src = ["def probe(img, out, b_off, a_const, b_const, a_step, b_step, ksteps, nwords):",
           "    sm = cuda.shared.array(0, uint16)",
           "    tid = cuda.threadIdx.x",
           "    base = int64(ptx.cvta_shared(sm, 0))",
           "    pad = ((1024 - (base & 1023)) & 1023) // 2",
           "    for i in range(tid, nwords, 128):",
           "        sm[pad + i] = img[i]",
           "    wp.fence_proxy_async()",
           "    cuda.syncthreads()",
           "    sa = base + pad * 2",
           f"    acc = wp.acc_zeros({nreg})",
           "    wp.wgmma_fence()",
           "    for s in range(ksteps):",
           "        da = a_const | (((sa + s * a_step) >> 4) & 0x3FFF)",
           "        db = b_const | (((sa + b_off + s * b_step) >> 4) & 0x3FFF)",
           "        acc = wg(sm, acc, da, db, 1)",
           "    wp.wgmma_commit()",
           "    acc = wp.wgmma_wait_acc(0, acc)"]
    for i in range(nreg):
        src.append(f"    out[tid * {nreg} + {i}] = acc[{i}]")
    g = {"cuda": cuda, "float32": float32, "int64": int64, "uint16": uint16, "ptx": ptx, "wp": wp,
         "wg": wp.get_wgmma(n, dtype, ta, tb)}
    exec(compile("\n".join(src) + "\n", f"<probe n{n}>", "exec"), g)
    k = _KERNELS[key] = cuda.jit(g["probe"])
    return k


def fragment_to_matrix(out, n):
    """The 64 x n matrix from per-thread fragments out[tid, reg] (the documented accumulator layout)."""
    D = np.full((64, n), np.nan)
    for tid in range(128):
        w, g, t = tid >> 5, (tid & 31) >> 2, tid & 3
        for j in range(n // 8):
            D[16 * w + g, 8 * j + 2 * t] = out[tid, 4 * j]
            D[16 * w + g, 8 * j + 2 * t + 1] = out[tid, 4 * j + 1]
            D[16 * w + g + 8, 8 * j + 2 * t] = out[tid, 4 * j + 2]
            D[16 * w + g + 8, 8 * j + 2 * t + 1] = out[tid, 4 * j + 3]
    return D


def run_variant(v, seed=0):
    from numba import cuda
    rng = np.random.default_rng(seed)
    n, K = v["n"], v["K"]
    img, b_off, A, B = build_image(v, rng)
    ref = A @ B
    extra = {}
    if v["dtype"] == "tf32":   # pass / fail against truncated inputs; also report rounded and exact FP32 inputs
        ref = _tf32_trunc(A).astype(np.float64) @ _tf32_trunc(B).astype(np.float64)
        extra = {"rna": _tf32_rna(A).astype(np.float64) @ _tf32_rna(B).astype(np.float64), "fp32": A @ B}
    kern = make_kernel(n, v["dtype"], v["ta"], v["tb"])
    out = np.full(128 * n // 2, np.nan, dtype=np.float32)
    d_img, d_out = cuda.to_device(img), cuda.to_device(out)
    smem = img.nbytes + 1024
    kern[1, 128, 0, smem](d_img, d_out, np.int64(b_off),
                          np.int64(L.desc_const(v["A"]["lbo"], v["A"]["sbo"], v["A"]["swz"])),
                          np.int64(L.desc_const(v["B"]["lbo"], v["B"]["sbo"], v["B"]["swz"])),
                          np.int64(v["A"]["step"]), np.int64(v["B"]["step"]),
                          np.int64(K // (8 if v["dtype"] == "tf32" else 16)),
                          np.int64(img.size))
    cuda.synchronize()
    got = d_out.copy_to_host().reshape(128, n // 2)
    D = fragment_to_matrix(got, n)
    err = np.abs(D - ref)
    tol = 1e-4 * K
    bad = ~(err <= tol)
    line = f"{'PASS' if not bad.any() else 'FAIL'} {v['name']:26s} max_err {np.nanmax(err):.3e} " \
           f"wrong {int(bad.sum())}/{bad.size}"
    for name, r in extra.items():
        line += f" | vs {name} inputs max_err {np.nanmax(np.abs(D - r)):.3e}"
    if bad.any():
        perm = np.allclose(np.sort(D.ravel()), np.sort(ref.ravel()), atol=tol)
        line += f" same-multiset-as-oracle {perm}"
        for r, c in list(zip(*np.nonzero(bad)))[:6]:
            where = np.unravel_index(np.argmin(np.abs(ref - D[r, c])), ref.shape)
            near = abs(ref[where] - D[r, c]) <= 2e-5
            line += f"\n     D[{r},{c}] got {D[r, c]:.5f} want {ref[r, c]:.5f}" + \
                    (f" (= oracle[{where[0]},{where[1]}])" if near else " (no oracle match)")
    return line


def worker(names):
    for name in names:
        v = next(x for x in VARIANTS if x["name"] == name)
        print(f"START {name}", flush=True)
        t0 = time.perf_counter()
        try:
            line = run_variant(v)
        except Exception as e:   # a fault poisons the context: report and let the driver restart us
            print(f"FAIL {name:26s} exception {type(e).__name__}: {' '.join(str(e).split())[:300]}", flush=True)
            sys.exit(3)
        print(line + f"  ({time.perf_counter() - t0:.1f}s)", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--list", action="store_true")
    p.add_argument("--only", default="")
    p.add_argument("--worker", default="")
    args = p.parse_args()
    if args.worker:
        worker(args.worker.split(","))
        return
    names = [v["name"] for v in VARIANTS]
    if args.only:
        want = set(args.only.split(","))
        want |= set(TF32) if "tf32" in want else set()
        names = [n for n in names if n in want]
    if args.list:
        print("\n".join(names))
        return
    todo = list(names)
    while todo:
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", ",".join(todo)],
                              capture_output=True, text=True, timeout=300)
        started = [ln[6:].strip() for ln in proc.stdout.splitlines() if ln.startswith("START ")]
        for ln in proc.stdout.splitlines():
            if not ln.startswith("START "):
                print(ln, flush=True)
        if proc.returncode == 0:
            break
        last = started[-1] if started else todo[0]
        if not any(ln.startswith(("FAIL " + last, "PASS " + last)) for ln in proc.stdout.splitlines()):
            print(f"FAIL {last:26s} worker died rc={proc.returncode}: {proc.stderr.strip()[-600:]}", flush=True)
        todo = todo[todo.index(last) + 1:]


if __name__ == "__main__":
    main()
