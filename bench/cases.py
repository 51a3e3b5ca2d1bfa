"""The benchmark cases: published shape sets, each with its FLOP and byte counts.

A :class:`Case` names one problem (op, shapes, dtype, layout). ``flops`` and ``bytes`` are the formulas
below, so every TFLOP/s and GB/s figure in a report can be re-derived from the case alone:

* conv (fprop, dgrad, wgrad): ``flops = 2 * N * K * P * Q * C * R * S`` (one multiply-add = 2 FLOP; the
  three passes do the same arithmetic); ``bytes = itemsize * (|x| + |w| + |y|)`` (each operand moved once:
  fprop reads x, w and writes y; dgrad reads dy, w and writes dx; wgrad reads x, dy and writes dw).
* GEMM ``C[M,N] = A[M,K] B[K,N]``: ``flops = 2 * M * N * K``; ``bytes = itemsize * (MK + KN + MN)``.
* memory-bound ops (norms, pooling, softmax, pointwise): ``bytes`` = one read of every input and one write
  of every output (the ideal a single-pass kernel reaches; GB/s is reported against it), ``flops`` a
  nominal per-element count (given with each builder) used only to place the op on the roofline.

Sources of the shape sets:

* ResNet-50: He, Zhang, Ren, Sun, "Deep Residual Learning for Image Recognition" (CVPR 2016), Table 1
  (the 50-layer column), with the v1.5 placement of the stride-2 in each bottleneck's 3x3 conv (as in
  torchvision's ``resnet50`` and NVIDIA's DeepLearningExamples "ResNet50 v1.5"); 224x224 input.
  :data:`RESNET50` lists every distinct conv layer once, with how often it occurs in one forward pass.
* GEMM 1024^3..8192^3 (the cuBLAS / Triton tutorial sweep) plus skinny shapes of inference and LLM
  layers (small M = batch of tokens, small K), FP32 and BF16; TF32 and FP16 at 4096^3 and 8192^3.
* Norm / pool / softmax shapes: ncudnn issue 4 (BN N32 C256 56x56, LN/RMS 8192x4096 and 8192x1024, pool
  3x3 s2 on N32 C256 112x112, softmax 8192x1024 and 8192x32768).
"""
import math
from dataclasses import dataclass, field
from typing import Dict, Tuple

SUITES = ("conv", "gemm", "norm", "pool", "softmax", "pointwise", "reduce", "attention")
ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8}

# ResNet-50 v1.5 distinct conv layers: (name, C, K, H=W of the input, R=S, stride, count per forward).
# Padding is (R - 1) // 2. Stages: conv1 (112x112 out), conv2_x 56x56, conv3_x 28x28, conv4_x 14x14,
# conv5_x 7x7; "ds" = the projection shortcut (1x1, stride of the stage) of a stage's first block.
RESNET50 = (
    ("conv1_7x7", 3, 64, 224, 7, 2, 1),
    ("c2_1x1_64_64", 64, 64, 56, 1, 1, 1),         # conv2_1 reduce (input from the max pool: 64 ch)
    ("c2_3x3_64", 64, 64, 56, 3, 1, 3),
    ("c2_1x1_64_256", 64, 256, 56, 1, 1, 4),       # 3 expands + the conv2 shortcut (stride 1)
    ("c2_1x1_256_64", 256, 64, 56, 1, 1, 2),
    ("c3_1x1_256_128", 256, 128, 56, 1, 1, 1),     # conv3_1 reduce, still at 56x56
    ("c3_3x3_128_s2", 128, 128, 56, 3, 2, 1),      # v1.5: the stride sits here, 56 -> 28
    ("c3_1x1_128_512", 128, 512, 28, 1, 1, 4),
    ("c3_ds_256_512_s2", 256, 512, 56, 1, 2, 1),
    ("c3_1x1_512_128", 512, 128, 28, 1, 1, 3),
    ("c3_3x3_128", 128, 128, 28, 3, 1, 3),
    ("c4_1x1_512_256", 512, 256, 28, 1, 1, 1),
    ("c4_3x3_256_s2", 256, 256, 28, 3, 2, 1),      # 28 -> 14
    ("c4_1x1_256_1024", 256, 1024, 14, 1, 1, 6),
    ("c4_ds_512_1024_s2", 512, 1024, 28, 1, 2, 1),
    ("c4_1x1_1024_256", 1024, 256, 14, 1, 1, 5),
    ("c4_3x3_256", 256, 256, 14, 3, 1, 5),
    ("c5_1x1_1024_512", 1024, 512, 14, 1, 1, 1),
    ("c5_3x3_512_s2", 512, 512, 14, 3, 2, 1),      # 14 -> 7
    ("c5_1x1_512_2048", 512, 2048, 7, 1, 1, 3),
    ("c5_ds_1024_2048_s2", 1024, 2048, 14, 1, 2, 1),
    ("c5_1x1_2048_512", 2048, 512, 7, 1, 1, 2),
    ("c5_3x3_512", 512, 512, 7, 3, 1, 2),
)
#: layers in the --quick subset (1x1 and 3x3, every stage, strided and not)
RESNET50_QUICK = ("c2_3x3_64", "c2_1x1_256_64", "c3_3x3_128_s2", "c4_3x3_256", "c4_1x1_1024_256",
                  "c5_3x3_512")

GEMM_CUBES = (1024, 2048, 4096, 8192)
# skinny (M, N, K): decode-like GEMV-ish rows, small token batches, wide-and-short, small K
GEMM_SKINNY = ((16, 8192, 8192), (128, 8192, 8192), (8192, 128, 8192), (8192, 8192, 128), (65536, 1024, 64),
               (8192, 8192, 256), (16384, 64, 4096))   # the last two: issue 5's skinny targets (m, n, k)


@dataclass
class Case:
    """One benchmark problem. ``params`` hold the shape; ``layout`` is "nhwc" / "nchw" / "rowmajor"."""
    suite: str
    op: str
    name: str
    params: Dict[str, int]
    dtype: str = "float32"
    layout: str = "nhwc"
    flops: int = 0
    bytes: int = 0
    quick: bool = False
    source: str = ""
    count: int = 1                   # occurrences per network forward (ResNet-50 layers)
    tags: Tuple[str, ...] = field(default_factory=tuple)

    @property
    def id(self):
        return f"{self.suite}/{self.op}/{self.name}/{self.dtype}"

    @property
    def itemsize(self):
        return ITEMSIZE[self.dtype]

    @property
    def intensity(self):
        """FLOP per byte moved (the roofline x axis)."""
        return self.flops / self.bytes if self.bytes else 0.0

    def to_json(self):
        return {"id": self.id, "suite": self.suite, "op": self.op, "name": self.name, "params": dict(self.params),
                "dtype": self.dtype, "layout": self.layout, "flops": self.flops, "bytes": self.bytes,
                "quick": self.quick, "source": self.source, "count": self.count}


# ------------------------------------------------------------------------------ formulas

def conv_out(h, r, stride, pad, dil=1):
    return (h + 2 * pad - dil * (r - 1) - 1) // stride + 1


def conv_flops(n, c, k, p, q, r, s):
    """2 * N * K * P * Q * C * R * S: fprop, dgrad and wgrad all do this many FLOP."""
    return 2 * n * k * p * q * c * r * s


def conv_bytes(op, n, c, h, w, k, p, q, r, s, itemsize):
    x, wt, y = n * c * h * w, k * c * r * s, n * k * p * q
    return itemsize * (x + wt + y)  # fprop: x,w -> y; dgrad: dy,w -> dx; wgrad: x,dy -> dw


def gemm_flops(m, n, k):
    return 2 * m * n * k


def gemm_bytes(m, n, k, itemsize):
    return itemsize * (m * k + k * n + m * n)


# ------------------------------------------------------------------------------ builders

def conv_case(op, name, n, c, k, h, r, stride, dtype="float32", count=1, quick=False, source="ResNet-50 v1.5"):
    pad = (r - 1) // 2
    p = conv_out(h, r, stride, pad)
    params = dict(n=n, c=c, k=k, h=h, w=h, r=r, s=r, p=p, q=p, stride=stride, pad=pad)
    return Case("conv", op, f"{name}_n{n}", params, dtype, "nhwc", conv_flops(n, c, k, p, p, r, r),
                conv_bytes(op, n, c, h, h, k, p, p, r, r, ITEMSIZE[dtype]), quick, source, count)


def conv_cases(batches=(32, 128)):
    out = []
    for n in batches:
        for name, c, k, h, r, stride, count in RESNET50:
            for op in ("conv_fprop", "conv_dgrad", "conv_wgrad"):
                if op == "conv_dgrad" and name == "conv1_7x7":
                    continue  # no gradient flows into the image: training never runs this dgrad
                quick = n == 32 and name in RESNET50_QUICK and (op == "conv_fprop" or name in
                                                               ("c2_3x3_64", "c4_1x1_1024_256"))
                out.append(conv_case(op, name, n, c, k, h, r, stride, count=count, quick=quick))
    return out


#: conv fprop + bias + relu (one fused graph): issue 5's layer set (3x3 stride-1 layers, the seed
#: tutorial's C128->K256 56x56 layer, two 1x1 layers, the 7x7 stem) and issue 6's Winograd set
#: (the 3x3 stride-1 layers at N=32 and N=128, and the seed layer); BF16 for the tensor-core issue
FUSED = (
    ("c2_3x3_64", 64, 64, 56, 3, 1),
    ("c3_3x3_128", 128, 128, 28, 3, 1),
    ("c4_3x3_256", 256, 256, 14, 3, 1),
    ("c5_3x3_512", 512, 512, 7, 3, 1),
    ("seed_3x3_128_256", 128, 256, 56, 3, 1),     # the seed tutorial's layer
    ("c2_1x1_256_64", 256, 64, 56, 1, 1),
    ("c2_1x1_64_256", 64, 256, 56, 1, 1),
    ("conv1_7x7", 3, 64, 224, 7, 2),
)


def fused_cases():
    out = []
    for n, dtype in ((32, "float32"), (128, "float32"), (32, "bfloat16")):
        for name, c, k, h, r, stride in FUSED:
            if n == 128 and (r != 3 or name.startswith("seed")):
                continue  # N=128: the 3x3 stride-1 ResNet-50 layers (issue 6)
            out.append(conv_case("conv_fprop_bias_relu", name, n, c, k, h, r, stride, dtype,
                                 quick=n == 32 and dtype == "float32" and name in ("c2_3x3_64", "seed_3x3_128_256"),
                                 source="seed tutorial" if name.startswith("seed") else "ResNet-50 v1.5"))
    return out


def gemm_case(m, n, k, dtype="float32", quick=False, source="GEMM sweep", tf32=False):
    """``tf32``: FP32 operands on TF32 tensor cores (both libraries opt in through the DOWN_CONVERT_INPUTS
    note; the fair reference is cuBLAS with TF32), B stored (n, k) as TF32 kernels read it."""
    params = dict(m=m, n=n, k=k, **({"tf32": 1} if tf32 else {}))
    return Case("gemm", "matmul", f"{m}x{n}x{k}" + ("_tf32" if tf32 else ""), params, dtype, "rowmajor",
                gemm_flops(m, n, k), gemm_bytes(m, n, k, ITEMSIZE[dtype]), quick, source)


def gemm_cases():
    out = []
    for dt in ("float32", "bfloat16"):
        for s in GEMM_CUBES:
            out.append(gemm_case(s, s, s, dt, quick=s in (4096, 8192) and (dt == "float32" or s == 8192)))
        for m, n, k in GEMM_SKINNY:
            out.append(gemm_case(m, n, k, dt, quick=(m, n, k) == (128, 8192, 8192) and dt == "float32",
                                 source="skinny GEMM"))
    for s in (4096, 8192):   # issue 7's TF32 target
        out.append(gemm_case(s, s, s, "float32", quick=s == 8192, source="TF32 tensor cores", tf32=True))
    for s in (4096, 8192):   # FP16 in, FP32 accumulate, FP16 out (wgmma); fair reference: cuBLAS FP16
        out.append(gemm_case(s, s, s, "float16", quick=s == 8192, source="FP16 tensor cores"))
    return out


def mem_case(suite, op, name, params, elems_in, elems_out, flops_per_elem, dtype="float32", layout="rowmajor",
             quick=False, source="issue 4 shape set"):
    """A memory-bound case: bytes = itemsize * (elements read once + elements written once)."""
    it = ITEMSIZE[dtype]
    return Case(suite, op, name, params, dtype, layout, int(flops_per_elem * elems_in), it * (elems_in + elems_out),
                quick, source)


def norm_cases():
    out = []
    n, c, h = 32, 256, 56
    e = n * c * h * h
    for layout in ("nchw", "nhwc"):
        # BN training forward: ~8 FLOP/element (sum, sum of squares, subtract, scale, shift)
        out.append(mem_case("norm", "batchnorm_fwd", f"n{n}c{c}h{h}_{layout}", dict(n=n, c=c, h=h, w=h), e, e, 8,
                            layout=layout, quick=layout == "nhwc"))
        # BN backward: reads x, dy; writes dx (~12 FLOP/element)
        out.append(mem_case("norm", "batchnorm_bwd", f"n{n}c{c}h{h}_{layout}", dict(n=n, c=c, h=h, w=h), 2 * e, e,
                            6, layout=layout))
    for rows, cols in ((8192, 4096), (8192, 1024)):
        e = rows * cols
        for op, quick in (("layernorm_fwd", cols == 4096), ("rmsnorm_fwd", cols == 4096)):
            out.append(mem_case("norm", op, f"{rows}x{cols}", dict(rows=rows, cols=cols), e, e, 8, quick=quick))
        out.append(mem_case("norm", "layernorm_bwd", f"{rows}x{cols}", dict(rows=rows, cols=cols), 2 * e, e, 6))
    return out


def pool_cases():
    n, c, h = 32, 256, 112
    p = conv_out(h, 3, 2, 1)
    out = []
    for op in ("max_pool", "avg_pool"):
        for layout in ("nhwc", "nchw"):
            out.append(mem_case("pool", op, f"3x3s2_n{n}c{c}h{h}_{layout}",
                                dict(n=n, c=c, h=h, w=h, r=3, stride=2, pad=1, p=p, q=p), n * c * h * h,
                                n * c * p * p, 9 * p * p / (h * h), layout=layout,
                                quick=layout == "nhwc" and op == "max_pool"))
    # backward (training): max recomputes the winners from x (cuDNN's pooling backward takes x; torch keeps the
    # forward's indices), average needs dy only; bytes: dy (+ x) read, dx written
    for op in ("max_pool_bwd", "avg_pool_bwd"):
        for layout in ("nhwc", "nchw"):
            reads = n * c * p * p + (n * c * h * h if op == "max_pool_bwd" else 0)
            out.append(mem_case("pool", op, f"3x3s2_n{n}c{c}h{h}_{layout}",
                                dict(n=n, c=c, h=h, w=h, r=3, stride=2, pad=1, p=p, q=p), reads,
                                n * c * h * h, 9 * p * p / (h * h), layout=layout,
                                quick=layout == "nhwc" and op == "avg_pool_bwd"))
    return out


def softmax_cases():
    return [mem_case("softmax", "softmax", f"{r}x{c}", dict(rows=r, cols=c), r * c, r * c, 5, quick=True)
            for r, c in ((8192, 1024), (8192, 32768))]


def pointwise_cases():
    big = 1 << 26  # 64 Mi elements: 256 MB read + 256 MB written in FP32
    n, c, h = 32, 256, 56
    e = n * c * h * h
    return [
        mem_case("pointwise", "relu", f"{big}", dict(elems=big), big, big, 1, quick=True, source="bandwidth"),
        mem_case("pointwise", "bias_relu", f"n{n}c{c}h{h}_nhwc", dict(n=n, c=c, h=h, w=h), e, e, 2, layout="nhwc",
                 quick=True, source="conv epilogue"),
        mem_case("pointwise", "scale_bias_relu_add", f"n{n}c{c}h{h}_nhwc", dict(n=n, c=c, h=h, w=h), 2 * e, e, 2,
                 layout="nhwc", source="BN inference + residual"),
        mem_case("pointwise", "bias_gelu", "8192x4096", dict(rows=8192, cols=4096), 8192 * 4096, 8192 * 4096, 20,
                 source="transformer MLP epilogue"),
    ]


def reduce_cases():
    """Large reductions (issue 4: >= 90% of copy bandwidth): a sum per row, a sum per column, a global
    amax; bytes = the input read once (the outputs are tiny)."""
    r, c = 8192, 32768
    return [mem_case("reduce", "reduce_sum_rows", f"{r}x{c}", dict(rows=r, cols=c, axis=1), r * c, r, 1, quick=True,
                     source="bandwidth"),
            mem_case("reduce", "reduce_sum_cols", f"{c}x{r}", dict(rows=c, cols=r, axis=0), r * c, r, 1,
                     source="bandwidth (column sums, e.g. dbias)"),
            mem_case("reduce", "reduce_amax", f"{r}x{c}", dict(rows=r, cols=c, axis=-1), r * c, 1, 2,
                     source="FP8 amax")]


def attention_case(op, b, h, s, d, causal, hk=None, sq=None, name=None, quick=False,
                   source="FlashAttention benchmark shapes"):
    """One SDPA case, BF16, BHSD: ``h`` query heads, ``hk`` K/V heads (GQA when fewer), ``sq`` query rows
    (default ``s``), ``s`` keys. Forward FLOP = 4 * B * H * Sq * S * D (QK^T and PV; half under a causal mask);
    backward FLOP = 2.5x the forward (S recomputed, dP, dV, dK, dQ: five products to the forward's two).
    Bytes: the forward reads Q, K, V and writes O; the backward reads Q, K, V, O, dO and the FP32 stats and
    writes dQ, dK, dV, each once."""
    hk, sq = hk or h, sq or s
    flops = 4 * b * h * sq * s * d // (2 if causal else 1)
    qo, kv = b * h * sq * d, b * hk * s * d
    if op == "sdpa_bwd":
        flops, byt = flops * 5 // 2, 2 * (4 * qo + 4 * kv) + 4 * b * h * sq   # Q O dO dQ, K V dK dV
    else:
        byt = 2 * (2 * qo + 2 * kv)
    params = dict(b=b, h=h, s=s, d=d, causal=int(causal))
    if hk != h:
        params["hk"] = hk
    if sq != s:
        params["sq"] = sq
    name = name or f"b{b}h{h}s{s}d{d}{'_causal' if causal else ''}"
    return Case("attention", op, name, params, "bfloat16", "bhsd", flops, byt, quick, source)


def attention_cases():
    """Issue 25's SDPA targets (the causal ones in --quick), a GQA and a decode forward, and the backward."""
    out = [attention_case("sdpa_fwd", b, h, s, d, causal, quick=causal)
           for b, h, s, d, causal in ((4, 16, 2048, 128, True), (8, 16, 1024, 64, False),
                                      (4, 16, 4096, 128, False), (4, 16, 4096, 128, True),
                                      (8, 16, 2048, 64, False), (8, 16, 2048, 64, True))]
    # grouped-query attention (Llama-style: 32 query heads sharing 8 K/V heads) and decode (one new token against
    # a long K/V cache)
    out.append(attention_case("sdpa_fwd", 4, 32, 4096, 128, True, hk=8, name="b4h32kv8s4096d128_causal",
                              source="GQA (Llama 3 8B heads)"))
    out.append(attention_case("sdpa_fwd", 16, 32, 8192, 128, False, hk=8, sq=1, name="b16h32kv8q1s8192d128",
                              source="decode: one query row, an 8K K/V cache"))
    out += [attention_case("sdpa_bwd", b, h, s, d, causal, quick=causal and d == 128)
            for b, h, s, d, causal in ((4, 16, 4096, 128, False), (4, 16, 4096, 128, True), (8, 16, 2048, 64, True))]
    return out


def all_cases():
    """Every case, in the order a time-limited run should meet them: the fused conv layer set, the other
    suites, then the plain ResNet-50 passes at N=32 and at N=128."""
    conv = conv_cases()
    return (fused_cases() + gemm_cases() + norm_cases() + pool_cases() + softmax_cases() + pointwise_cases()
            + reduce_cases() + attention_cases() + [c for c in conv if c.params["n"] == 32] + [c for c in conv if c.params["n"] != 32])


def sim_cases():
    """Tiny shapes for the simulator smoke mode (``ncudnn bench --sim``): seconds, not minutes."""
    out = [conv_case("conv_fprop", "tiny_3x3", 1, 4, 4, 6, 3, 1, source="sim smoke"),
           conv_case("conv_fprop_bias_relu", "tiny_3x3", 1, 4, 4, 6, 3, 1, source="sim smoke"),
           gemm_case(8, 8, 8, source="sim smoke"),
           mem_case("norm", "layernorm_fwd", "4x16", dict(rows=4, cols=16), 64, 64, 8, source="sim smoke"),
           mem_case("pool", "max_pool", "3x3s2_n1c2h6_nhwc", dict(n=1, c=2, h=6, w=6, r=3, stride=2, pad=1, p=3,
                    q=3), 72, 18, 1, layout="nhwc", source="sim smoke"),
           mem_case("pool", "max_pool_bwd", "3x3s2_n1c2h6_nhwc", dict(n=1, c=2, h=6, w=6, r=3, stride=2, pad=1,
                    p=3, q=3), 90, 72, 1, layout="nhwc", source="sim smoke"),
           mem_case("softmax", "softmax", "4x8", dict(rows=4, cols=8), 32, 32, 5, source="sim smoke"),
           mem_case("pointwise", "relu", "256", dict(elems=256), 256, 256, 1, source="sim smoke"),
           mem_case("reduce", "reduce_sum_rows", "4x24", dict(rows=4, cols=24, axis=1), 96, 4, 1, source="sim smoke"),
           mem_case("reduce", "reduce_sum_cols", "24x4", dict(rows=24, cols=4, axis=0), 96, 4, 1, source="sim smoke"),
           mem_case("reduce", "reduce_amax", "4x24", dict(rows=4, cols=24, axis=-1), 96, 1, 2, source="sim smoke"),
           mem_case("pointwise", "bias_relu", "n1c4h3_nhwc", dict(n=1, c=4, h=3, w=3), 36, 36, 2, layout="nhwc",
                    source="sim smoke")]
    out.append(attention_case("sdpa_bwd", 1, 2, 24, 16, True, hk=1, name="tiny_b1h2kv1s24d16_causal",
                              source="sim smoke"))
    for c in out:
        c.tags = ("sim",)
    return out


def select(suite="all", quick=False, sim=False):
    """The cases of ``suite`` ("all" or one of :data:`SUITES`), the --quick subset when asked."""
    if suite != "all" and suite not in SUITES:
        raise ValueError(f"unknown suite {suite!r}; one of {', '.join(SUITES)} or all")
    pool = sim_cases() if sim else all_cases()
    out = [c for c in pool if suite == "all" or c.suite == suite]
    if quick and not sim:
        out = [c for c in out if c.quick]
    return out


def matches(case_id, filt):
    """``filt``: comma-separated terms; the id must contain one of the plain terms (if any) and none of
    the terms written ``!TERM``."""
    terms = [t for t in (x.strip() for x in filt.split(",")) if t]
    want = [t for t in terms if not t.startswith("!")]
    avoid = [t[1:] for t in terms if t.startswith("!")]
    return (not want or any(t in case_id for t in want)) and not any(t in case_id for t in avoid)


def by_id(case_id):
    for c in all_cases() + sim_cases():
        if c.id == case_id:
            return c
    raise KeyError(case_id)


def geomean(xs):
    xs = [x for x in xs if x and x > 0 and math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")
