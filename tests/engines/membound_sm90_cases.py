"""sm_90 compile cases of the memory-bound engines: realistic problem shapes, every kernel launch
(Step) the engine plans, compiled in a child process without a GPU (kcache.resource_usage_subprocess).

``factory(case, k)`` returns the dispatcher of step ``k`` of ``case``; ``signature(_)`` the argument
types that step is compiled with (the same process: the factory remembers its step)."""
from ncudnn.ir import (GenStats, NormBwd, NormFwd, OpGraph, Pointwise, Reduction, ResampleFwd, Rng, TensorDesc,
                       packed_strides)
from ncudnn.types import (cudnnBackendNormFwdPhase_t as PH, cudnnBackendNormMode_t as NM, cudnnDataType_t as DT,
                          cudnnPaddingMode_t as PAD, cudnnPointwiseMode_t as PM, cudnnReduceTensorOp_t as RO,
                          cudnnResampleMode_t as RM)

H16, B16, F32 = DT.CUDNN_DATA_HALF, DT.CUDNN_DATA_BFLOAT16, DT.CUDNN_DATA_FLOAT
SM_COUNT = 132


def _t(uid, dims, dtype=F32, strides=None, **kw):
    return TensorDesc(uid, tuple(dims), tuple(strides) if strides else packed_strides(dims), dtype, name=f"t{uid}",
                      **kw)


def _eps(uid, v=1e-5):
    return TensorDesc(uid, (1,), (1,), F32, is_by_value=True, value=v, name="eps")


def _nhwc(n, c, h, w):
    return (h * w * c, 1, w * c, c)


def bn_train_nhwc():
    d, st = (32, 256, 56, 56), _nhwc(32, 256, 56, 56)
    ch = (1, 256, 1, 1)
    ins = {"X": _t(1, d, H16, st), "SCALE": _t(2, ch), "BIAS": _t(3, ch), "EPSILON": _eps(4),
           "INPUT_RUNNING_MEAN": _t(5, ch), "INPUT_RUNNING_VAR": _t(6, ch), "EXP_AVG_FACTOR": _eps(7, 0.1)}
    outs = {"Y": TensorDesc(10, is_virtual=True), "MEAN": _t(11, ch), "INV_VARIANCE": _t(12, ch),
            "OUTPUT_RUNNING_MEAN": _t(13, ch), "OUTPUT_RUNNING_VAR": _t(14, ch)}
    bn = NormFwd("bn", ins, outs, mode=NM.CUDNN_BATCH_NORM, phase=PH.CUDNN_NORM_FWD_TRAINING)
    relu = Pointwise("relu", {"X": bn.outputs["Y"]}, {"Y": _t(20, d, H16, st)}, mode=PM.CUDNN_POINTWISE_RELU_FWD)
    return "norm_batch", OpGraph([bn, relu])


def bn_bwd_nchw():
    d, ch = (32, 256, 56, 56), (1, 256, 1, 1)
    ins = {"X": _t(1, d, B16), "DY": _t(2, d, B16), "SCALE": _t(3, ch), "MEAN": _t(4, ch), "INV_VARIANCE": _t(5, ch)}
    outs = {"DX": _t(10, d, B16), "DSCALE": _t(11, ch), "DBIAS": _t(12, ch)}
    return "norm_batch", OpGraph([NormBwd("bwd", ins, outs, mode=NM.CUDNN_BATCH_NORM)])


def layernorm_fwd():
    d = (8192, 4096)
    ins = {"X": _t(1, d, B16), "SCALE": _t(2, (1, 4096)), "BIAS": _t(3, (1, 4096)), "EPSILON": _eps(4)}
    outs = {"Y": _t(10, d, B16), "MEAN": _t(11, (8192, 1)), "INV_VARIANCE": _t(12, (8192, 1))}
    return "norm_rows", OpGraph([NormFwd("ln", ins, outs, mode=NM.CUDNN_LAYER_NORM, phase=PH.CUDNN_NORM_FWD_TRAINING)])


def rmsnorm_bwd():
    d = (8192, 1024)
    ins = {"X": _t(1, d, H16), "DY": _t(2, d, H16), "SCALE": _t(3, (1, 1024)), "INV_VARIANCE": _t(5, (8192, 1))}
    outs = {"DX": _t(10, d, H16), "DSCALE": _t(11, (1, 1024))}
    return "norm_rows", OpGraph([NormBwd("bwd", ins, outs, mode=NM.CUDNN_RMS_NORM)])


def maxpool():
    x = _t(1, (32, 256, 112, 112), H16, _nhwc(32, 256, 112, 112))
    yd = (32, 256, 56, 56)
    r = ResampleFwd("pool", {"X": x}, {"Y": _t(2, yd, H16, _nhwc(*yd)), "IDX": _t(3, yd, DT.CUDNN_DATA_INT8,
                                                                                  _nhwc(*yd))},
                    mode=RM.CUDNN_RESAMPLE_MAXPOOL, spatial_dims=2, window=(3, 3), stride=(2, 2), pre_padding=(1, 1),
                    post_padding=(0, 0), padding_mode=PAD.CUDNN_NEG_INF_PAD)
    return "resample", OpGraph([r])


def reduction_rows():
    return "reduction", OpGraph([Reduction("r", {"X": _t(1, (8192, 4096), B16)}, {"Y": _t(2, (8192, 1))},
                                           mode=RO.CUDNN_REDUCE_TENSOR_NORM2)])


def genstats_nhwc():
    d = (32, 256, 56, 56)
    return "genstats", OpGraph([GenStats("gs", {"X": _t(1, d, H16, _nhwc(*d))},
                                         {"SUM": _t(2, (1, 256, 1, 1)), "SQSUM": _t(3, (1, 256, 1, 1))})])


def softmax_rows():
    d, st = (8192, 1024), (8192, 1)
    v = lambda u, dims=None: TensorDesc(u, dims, packed_strides(dims) if dims else None, F32 if dims else None,  # noqa
                                        is_virtual=True, name=f"v{u}")
    x, y = _t(1, d, H16), _t(2, d, H16)
    m, dd, e, s = v(10, st), v(11), v(12), v(13, st)
    nodes = [Reduction("max", {"X": x}, {"Y": m}, mode=RO.CUDNN_REDUCE_TENSOR_MAX),
             Pointwise("sub", {"X": x, "B": m}, {"Y": dd}, mode=PM.CUDNN_POINTWISE_SUB),
             Pointwise("exp", {"X": dd}, {"Y": e}, mode=PM.CUDNN_POINTWISE_EXP),
             Reduction("sum", {"X": e}, {"Y": s}, mode=RO.CUDNN_REDUCE_TENSOR_ADD),
             Pointwise("div", {"X": e, "B": s}, {"Y": y}, mode=PM.CUDNN_POINTWISE_DIV)]
    return "softmax_fused", OpGraph(nodes)


def rng_uniform():
    return "rng_philox", OpGraph([Rng("rng", {"SEED": TensorDesc(2, (1,), (1,), DT.CUDNN_DATA_INT64, is_by_value=True,
                                                                   value=7)},
                                      {"Y": _t(1, (4096, 4096), B16)}, distribution=1)])


CASES = {f.__name__: f for f in (bn_train_nhwc, bn_bwd_nchw, layernorm_fwd, rmsnorm_bwd, maxpool, reduction_rows,
                                  genstats_nhwc, softmax_rows, rng_uniform)}
_LAST = {}


def _patch_sm_count():
    import ncudnn.engines.rng.philox as a
    import ncudnn.kernels.pointwise.fused as b
    import ncudnn.kernels.primitives.warp as c
    import ncudnn.kernels.reduce.spec as d
    import ncudnn.kernels.resample.generic as e

    for mod in (a, b, c, d, e):
        mod.sm_count = lambda: SM_COUNT


def steps(case):
    """(engine name, [Step]) the engine plans for ``case`` with its default config."""
    from ncudnn.engines import api, registry

    name, g = CASES[case]()
    g.finalize()
    eng = registry.by_name(name)
    sub = api.problem(g)
    cfg = eng.default_config(sub)
    for m in ("_steps", "_plan", "_memo"):
        f = getattr(eng, m, None)
        if f is not None:
            return name, f(sub, cfg)[0]
    return name, [eng._step(sub, cfg)]


def factory(case, k):
    _patch_sm_count()
    step = steps(case)[1][k]
    _LAST["step"] = step
    return step.factory()


def signature(_dispatcher):
    return _LAST["step"].signature()
