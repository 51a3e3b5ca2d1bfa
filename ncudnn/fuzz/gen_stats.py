"""Batch-norm statistics graphs and random-number graphs: the engines of the per-channel statistics
(genstats, bn_finalize, bn_bwd_weights) and rng_philox.

``stats`` family:

* GENSTATS (SUM_SQSUM: per-channel sum and sum of squares) of an NCHW / NHWC / padded FP32 / FP16 /
  BF16 X through pygraph ``genstats`` (FP32 sums), or through the backend API.
* BN_FINALIZE_STATISTICS (training or inference) through the backend API (pygraph has no method for
  it): equivalent scale and bias from the sums, the saved mean and inverse std (the backend requires
  their descriptors), the running statistics updated (all four or none); ACCUM_COUNT, EPSILON and
  EXP_AVERAGE_FACTOR pass-by-value. The sums are drawn where the variance is well conditioned: SUM in [-1, 1), SQSUM in [count / 2, 2 count), so the
  variance SQSUM / count - mean^2 is at least 1/2 - 1/16.
* BN_BWD_WEIGHTS through the backend API: dscale, dbias and the dx coefficients of a batch norm from
  X, dY and the per-channel mean, inverse std and scale (the backend lowers the sums of dY and dY * X
  in front of it).

``rng`` family: the RNG node (Philox4x32-10) as pygraph ``rng``: BERNOULLI / UNIFORM / NORMAL into a
packed FP32 / FP16 / BF16 / FP64 output (BERNOULLI also INT8 / INT32 / UINT8, compared exactly), the
seed and offset pass-by-value INT64 tensors; the oracle generates the same stream.
"""
import ncudnn as cudnn
from ..ir import TensorDesc
from ..testing import SIM
from ..types import (cudnnBackendAttributeType_t as T, cudnnBackendDescriptorType_t as D,
                     cudnnBnFinalizeStatsMode_t as BF, cudnnGenStatsMode_t as GS)
from .backend_graph import BackendOp
from .spec import DT, Spec, capped, graph, packed, pick, rand_strides

SIZES = (1, 2, 3, 4, 5) if SIM else (1, 2, 3, 7, 8, 16, 33)
CH = (1, 2, 3, 5, 8) if SIM else (1, 3, 8, 32, 64, 100)
DTYPES = ((DT.FLOAT, "float"), (DT.HALF, "half"), (DT.BFLOAT16, "bfloat16"))
F32 = DT.FLOAT


def _ir(dtype):
    """The cudnnDataType_t of a pygraph data_type."""
    from ..frontend.enums import to_ir_dtype

    return to_ir_dtype(dtype)


class _Uids:
    """Tensor descriptors of one backend operation, uids 1, 2, ... in order of creation."""

    def __init__(self):
        self.n = 0

    def t(self, name, dims, dtype=F32, strides=None, by_value=False):
        self.n += 1
        return TensorDesc(self.n, tuple(dims), tuple(strides or packed(dims)), _ir(dtype), is_by_value=by_value,
                          name=name)


def _genstats(rng):
    dtype, dname = pick(rng, DTYPES)
    dims = capped([pick(rng, SIZES), pick(rng, CH)] + [pick(rng, SIZES) for _ in range(pick(rng, (1, 2, 2, 3)))])
    strides = rand_strides(rng, dims, pick(rng, ("row", "nhwc", None)), pad_p=0.2)
    chan = [1, dims[1]] + [1] * (len(dims) - 2)
    if rng.random() < 0.35:
        u = _Uids()
        x = u.t("X", dims, dtype, strides)
        op = BackendOp(D.CUDNN_BACKEND_OPERATION_GEN_STATS_DESCRIPTOR, "CUDNN_ATTR_OPERATION_GENSTATS_",
                       {"XDESC": x, "SUMDESC": u.t("SUM", chan), "SQSUMDESC": u.t("SQSUM", chan)},
                       {"MODE": (T.CUDNN_TYPE_GENSTATS_MODE, GS.CUDNN_GENSTATS_SUM_SQSUM),
                        "MATH_PREC": (T.CUDNN_TYPE_DATA_TYPE, _ir(F32))})
        return Spec(op, f"genstats {dname} x {dims} {strides} [backend API]", front_end="backend")
    g = graph(dtype)
    X = g.tensor(name="X", dim=dims, stride=strides)
    for o, name in zip(g.genstats(input=X, name="genstats"), ("SUM", "SQSUM")):
        o.set_output(True).set_name(name).set_data_type(F32).set_dim(chan).set_stride(packed(chan))
    return Spec(g, f"genstats {dname} x {dims} {strides}")


def _bn_finalize(rng):
    training = rng.random() < 0.7
    c = pick(rng, CH)
    count = int(pick(rng, (4, 12, 64)))
    chan = [1, c, 1, 1]
    io = F32
    u = _Uids()
    ten = {"Y_SUM_DESC": u.t("SUM", chan, io), "Y_SQ_SUM_DESC": u.t("SQSUM", chan, io),
           "SCALE_DESC": u.t("SCALE", chan, io), "BIAS_DESC": u.t("BIAS", chan, io),
           "EQ_SCALE_DESC": u.t("EQ_SCALE", chan, io), "EQ_BIAS_DESC": u.t("EQ_BIAS", chan, io)}
    running = not training or rng.random() < 0.7      # the backend takes the four running tensors together
    if running:
        ten.update(PREV_RUNNING_MEAN_DESC=u.t("PREV_RUNNING_MEAN", chan, io),
                   PREV_RUNNING_VAR_DESC=u.t("PREV_RUNNING_VAR", chan, io),
                   UPDATED_RUNNING_MEAN_DESC=u.t("UPDATED_RUNNING_MEAN", chan, io),
                   UPDATED_RUNNING_VAR_DESC=u.t("UPDATED_RUNNING_VAR", chan, io))
    # the backend requires the saved mean and inverse std (written in training, in inference too)
    ten.update(SAVED_MEAN_DESC=u.t("SAVED_MEAN", chan, io), SAVED_INV_STD_DESC=u.t("SAVED_INV_STD", chan, io))
    eps, momentum = float(pick(rng, (1e-5, 1e-3))), float(pick(rng, (0.1, 0.25)))
    ten.update(ACCUM_COUNT_DESC=u.t("count", [1, 1, 1, 1], DT.INT64, by_value=True),
               EPSILON_DESC=u.t("eps", [1, 1, 1, 1], io, by_value=True),
               EXP_AVERATE_FACTOR_DESC=u.t("momentum", [1, 1, 1, 1], io, by_value=True))
    mode = BF.CUDNN_BN_FINALIZE_STATISTICS_TRAINING if training else BF.CUDNN_BN_FINALIZE_STATISTICS_INFERENCE
    op = BackendOp(D.CUDNN_BACKEND_OPERATION_BN_FINALIZE_STATISTICS_DESCRIPTOR, "CUDNN_ATTR_OPERATION_BN_FINALIZE_",
                   ten, {"STATS_MODE": (T.CUDNN_TYPE_BN_FINALIZE_STATS_MODE, mode),
                         "MATH_PREC": (T.CUDNN_TYPE_DATA_TYPE, _ir(F32))})
    ranges = {"SQSUM": (count / 2, 2.0 * count), "PREV_RUNNING_VAR": (0.5, 2.0)}
    return Spec(op, f"bn_finalize {'training' if training else 'inference'} C {c} count {count} eps {eps} momentum "
                    f"{momentum}{' + running stats' if running else ''} [backend API]",
                ranges=ranges, scalars={"count": count, "eps": eps, "momentum": momentum}, front_end="backend")


def _bn_bwd_weights(rng):
    dtype, dname = pick(rng, DTYPES)
    dims = capped([pick(rng, SIZES), pick(rng, CH), pick(rng, SIZES), pick(rng, SIZES)])
    strides = rand_strides(rng, dims, pick(rng, ("row", "nhwc")), pad_p=0.0)
    chan = [1, dims[1], 1, 1]
    u = _Uids()
    ten = {"X_DESC": u.t("X", dims, dtype, strides), "DY_DESC": u.t("DY", dims, dtype, strides),
           "MEAN_DESC": u.t("mean", chan), "INVSTD_DESC": u.t("inv_std", chan), "BN_SCALE_DESC": u.t("scale", chan),
           "DBN_SCALE_DESC": u.t("DSCALE", chan), "DBN_BIAS_DESC": u.t("DBIAS", chan),
           "EQ_DY_SCALE_DESC": u.t("EQ_DY_SCALE", chan), "EQ_X_SCALE_DESC": u.t("EQ_X_SCALE", chan),
           "EQ_BIAS": u.t("EQ_BIAS", chan)}
    op = BackendOp(D.CUDNN_BACKEND_OPERATION_BN_BWD_WEIGHTS_DESCRIPTOR, "CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_", ten,
                   {"MATH_PREC": (T.CUDNN_TYPE_DATA_TYPE, _ir(F32))})
    return Spec(op, f"bn_bwd_weights {dname} x {dims} {strides} [backend API]", ranges={"inv_std": (0.5, 2.0)},
                front_end="backend")


def stats(rng):
    return pick(rng, (_genstats, _bn_finalize, _bn_bwd_weights))(rng)


RNG_FLOAT = ((DT.FLOAT, "float"), (DT.HALF, "half"), (DT.BFLOAT16, "bfloat16"), (DT.DOUBLE, "double"))
RNG_INT = ((DT.INT8, "int8"), (DT.INT32, "int32"), (DT.UINT8, "uint8"))


def rng_graph(rng):
    dist = pick(rng, ("BERNOULLI", "UNIFORM", "NORMAL"))
    dtype, dname = pick(rng, RNG_FLOAT + (RNG_INT if dist == "BERNOULLI" else ()))
    dims = capped([pick(rng, SIZES) for _ in range(pick(rng, (1, 2, 3, 4)))])
    g = graph(DT.FLOAT)
    seed, offset = (g.tensor(name=n, dim=[1, 1, 1, 1], stride=[1, 1, 1, 1], is_pass_by_value=True,
                             data_type=DT.INT64) for n in ("seed", "offset"))
    kw = {}
    if dist == "BERNOULLI":
        kw["bernoulli_probability"] = float(pick(rng, (0.1, 0.5, 0.9)))
    elif dist == "UNIFORM":
        kw.update(uniform_min=float(pick(rng, (-2.0, 0.0))), uniform_max=float(pick(rng, (1.0, 3.0))))
    else:
        kw.update(normal_mean=float(pick(rng, (0.0, 1.0))), normal_std=float(pick(rng, (0.5, 1.0))))
    Y = g.rng(seed=seed, offset=offset, distribution=getattr(cudnn.rng_distribution, dist), dim=dims,
              stride=packed(dims), name="rng", **kw)
    Y.set_output(True).set_name("Y").set_data_type(dtype)
    scalars = {"seed": int(rng.integers(0, 1 << 40)), "offset": int(rng.integers(0, 1 << 20))}
    return Spec(g, f"rng {dist} {kw} {dname} y {dims} seed {scalars['seed']} offset {scalars['offset']}",
                scalars=scalars)
