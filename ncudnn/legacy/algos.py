"""Convolution algorithm enums <-> engines, and the perf structs the Get / Find calls fill.

The one table to extend when a conv engine lands is :data:`ENGINE_FAMILY`: engine NAME -> the
algorithm family it implements per direction ("fwd", "dgrad", "wgrad"). An engine that accepts a
conv subgraph but is not in the table is classified from its numerical notes and its name
(:func:`family_of`): FFT note or "fft" -> FFT; WINOGRAD notes or "winograd" -> WINOGRAD (with
"nonfused" -> WINOGRAD_NONFUSED); "direct" -> DIRECT; "precomp" -> IMPLICIT_PRECOMP_GEMM;
"im2col" or a "gemm" that is not "implicit" -> GEMM; otherwise IMPLICIT_GEMM. Backward families:
dgrad ALGO_0 / wgrad ALGO_0 and ALGO_3 are the NONDETERMINISTIC (atomic-accumulating) variants,
ALGO_1 the deterministic GEMM-based ones.

An algorithm runs on an engine of its own family when one is registered, else on the first family
of its :data:`SUBSTITUTES` row that is (e.g. DIRECT on the implicit GEMM). FFT and FFT_TILING have no
row: they are NOT_SUPPORTED, honestly; so is BWD_FILTER_ALGO_WINOGRAD, which cuDNN does not implement.
"""
from ..types import (cudnnBackendNumericalNote_t, cudnnConvolutionBwdDataAlgo_t, cudnnConvolutionBwdFilterAlgo_t,
                     cudnnConvolutionFwdAlgo_t, cudnnDeterminism_t, cudnnMathType_t, cudnnStatus_t)

S = cudnnStatus_t
NN = cudnnBackendNumericalNote_t
FA = cudnnConvolutionFwdAlgo_t
DA = cudnnConvolutionBwdDataAlgo_t
WA = cudnnConvolutionBwdFilterAlgo_t
ALGO_ENUM = {"fwd": FA, "dgrad": DA, "wgrad": WA}
KIND_OF_DIRECTION = {"fwd": "conv_fprop", "dgrad": "conv_dgrad", "wgrad": "conv_wgrad"}

#: engine name -> {direction: algorithm family}. Extend as conv engines land.
ENGINE_FAMILY = {
    "conv_implicit_gemm": {"fwd": FA.CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
                           "dgrad": DA.CUDNN_CONVOLUTION_BWD_DATA_ALGO_1,
                           "wgrad": WA.CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1},
    "conv_implicit_precomp": {"fwd": FA.CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM,
                              "dgrad": DA.CUDNN_CONVOLUTION_BWD_DATA_ALGO_1,
                              "wgrad": WA.CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1},
    "conv_gemm_1x1": {"fwd": FA.CUDNN_CONVOLUTION_FWD_ALGO_GEMM},   # a 1x1 convolution is a plain GEMM
    "conv_gemm": {"fwd": FA.CUDNN_CONVOLUTION_FWD_ALGO_GEMM},
    "conv_direct": {"fwd": FA.CUDNN_CONVOLUTION_FWD_ALGO_DIRECT},
    "conv_winograd": {"fwd": FA.CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD,
                      "dgrad": DA.CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD},
    "conv_winograd_fused": {"fwd": FA.CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD,
                            "dgrad": DA.CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD},
    "conv_winograd_nonfused": {"fwd": FA.CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED,
                               "dgrad": DA.CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED,
                               "wgrad": WA.CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED},
}

#: algorithm -> families that may run it, preferred first (its own family first). Absent: NOT_SUPPORTED.
SUBSTITUTES = {
    "fwd": {
        FA.CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM: (FA.CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
                                                     FA.CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM),
        FA.CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM: (FA.CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM,
                                                             FA.CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM),
        FA.CUDNN_CONVOLUTION_FWD_ALGO_GEMM: (FA.CUDNN_CONVOLUTION_FWD_ALGO_GEMM,
                                            FA.CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM,
                                            FA.CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM),
        FA.CUDNN_CONVOLUTION_FWD_ALGO_DIRECT: (FA.CUDNN_CONVOLUTION_FWD_ALGO_DIRECT,
                                              FA.CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
                                              FA.CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM),
        FA.CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD: (FA.CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD,
                                                FA.CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED),
        FA.CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED: (FA.CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED,
                                                         FA.CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD),
    },
    "dgrad": {
        DA.CUDNN_CONVOLUTION_BWD_DATA_ALGO_0: (DA.CUDNN_CONVOLUTION_BWD_DATA_ALGO_0,
                                              DA.CUDNN_CONVOLUTION_BWD_DATA_ALGO_1),
        DA.CUDNN_CONVOLUTION_BWD_DATA_ALGO_1: (DA.CUDNN_CONVOLUTION_BWD_DATA_ALGO_1,),
        DA.CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD: (DA.CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD,
                                                     DA.CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED),
        DA.CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED: (DA.CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED,
                                                              DA.CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD),
    },
    "wgrad": {
        WA.CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0: (WA.CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0,
                                                WA.CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1),
        WA.CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1: (WA.CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1,),
        WA.CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3: (WA.CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3,
                                                WA.CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0,
                                                WA.CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1),
        WA.CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED:
            (WA.CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED,),
    },
}


def algos(direction):
    """Every algorithm value of a direction, in enum order (the COUNT sentinel left out)."""
    return [a for a in ALGO_ENUM[direction] if not a.name.endswith("_COUNT")]


def max_count(direction):
    return len(algos(direction))


def family_of(engine_name, direction, notes=()):
    """The algorithm family an engine implements in ``direction`` (see the module docstring)."""
    fam = ENGINE_FAMILY.get(engine_name, {}).get(direction)
    if fam is not None:
        return fam
    E = ALGO_ENUM[direction]
    n = engine_name.lower()
    notes = set(notes)
    nondet = NN.CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC in notes
    winograd = "winograd" in n or notes & {NN.CUDNN_NUMERICAL_NOTE_WINOGRAD, NN.CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_4x4,
                                           NN.CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_6x6,
                                           NN.CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_13x13}
    pre = {"fwd": "CUDNN_CONVOLUTION_FWD_ALGO_", "dgrad": "CUDNN_CONVOLUTION_BWD_DATA_ALGO_",
           "wgrad": "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_"}[direction]
    if "fft" in n or NN.CUDNN_NUMERICAL_NOTE_FFT in notes:
        return E[pre + ("FFT_TILING" if "tiling" in n else "FFT")]
    if winograd:
        if direction == "wgrad" or "nonfused" in n:
            return E[pre + "WINOGRAD_NONFUSED"]
        return E[pre + "WINOGRAD"]
    if direction != "fwd":
        return E[pre + ("0" if nondet else "1")]
    if "direct" in n:
        return E.CUDNN_CONVOLUTION_FWD_ALGO_DIRECT
    if "precomp" in n:
        return E.CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM
    if "im2col" in n or ("gemm" in n and "implicit" not in n and "igemm" not in n):
        return E.CUDNN_CONVOLUTION_FWD_ALGO_GEMM
    return E.CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM


def conv_part(ec, kind):
    """The EngineConfig (itself, or the composite part) that runs the ``kind`` conv node."""
    if not ec.parts:
        return ec
    for p in ec.parts:
        if kind in tuple(getattr(p.engine, "kinds", ())):
            return p
    others = [p for p in ec.parts if p.engine.name != "pointwise_fused"]
    return others[0] if others else ec.parts[0]


def config_family(ec, direction):
    p = conv_part(ec, KIND_OF_DIRECTION[direction])
    return family_of(p.engine.name, direction, p.numerical_notes)


def configs_for(ranked, algo, direction):
    """The ranked EngineConfigs that run ``algo`` (its own family first, then its substitutes)."""
    fams = SUBSTITUTES[direction].get(algo, ())
    by_fam = {}
    for ec in ranked:
        by_fam.setdefault(config_family(ec, direction), []).append(ec)
    out = []
    for f in fams:
        out += by_fam.get(f, [])
    return out


def determinism(ec):
    return cudnnDeterminism_t.CUDNN_NON_DETERMINISTIC if NN.CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC in \
        ec.numerical_notes else cudnnDeterminism_t.CUDNN_DETERMINISTIC


def math_type(ec, desc_math):
    """The math type a config runs under: the descriptor's when it uses tensor cores, else FMA."""
    if NN.CUDNN_NUMERICAL_NOTE_TENSOR_CORE in ec.numerical_notes:
        return desc_math if desc_math != cudnnMathType_t.CUDNN_FMA_MATH else cudnnMathType_t.CUDNN_TENSOR_OP_MATH
    return cudnnMathType_t.CUDNN_FMA_MATH


class _Perf:
    """A cudnnConvolution*AlgoPerf_t: the C fields by name."""

    __slots__ = ("algo", "status", "time", "memory", "determinism", "mathType", "reserved")
    ALGO = None

    def __init__(self, algo, status=S.CUDNN_STATUS_NOT_SUPPORTED, time=-1.0, memory=0,
                 determinism=cudnnDeterminism_t.CUDNN_DETERMINISTIC, mathType=cudnnMathType_t.CUDNN_DEFAULT_MATH):
        self.algo = self.ALGO(int(algo))
        self.status = S(int(status))
        self.time = float(time)
        self.memory = int(memory)
        self.determinism = cudnnDeterminism_t(int(determinism))
        self.mathType = cudnnMathType_t(int(mathType))
        self.reserved = [0, 0, 0]

    def __repr__(self):
        return (f"{type(self).__name__}(algo={self.algo.name}, status={self.status.name}, time={self.time:.4g} ms, "
                f"memory={self.memory}, determinism={self.determinism.name}, mathType={self.mathType.name})")


class cudnnConvolutionFwdAlgoPerf_t(_Perf):
    __slots__ = ()
    ALGO = FA


class cudnnConvolutionBwdDataAlgoPerf_t(_Perf):
    __slots__ = ()
    ALGO = DA


class cudnnConvolutionBwdFilterAlgoPerf_t(_Perf):
    __slots__ = ()
    ALGO = WA


PERF_TYPE = {"fwd": cudnnConvolutionFwdAlgoPerf_t, "dgrad": cudnnConvolutionBwdDataAlgoPerf_t,
             "wgrad": cudnnConvolutionBwdFilterAlgoPerf_t}
