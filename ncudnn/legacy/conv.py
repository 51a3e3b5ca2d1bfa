"""cudnnConvolutionForward / BackwardData / BackwardFilter / BackwardBias and
cudnnConvolutionBiasActivationForward, lowered to ConvFprop / ConvDgrad / ConvWgrad / Reduction
(+ a pointwise epilogue for blending, bias, z and the activation).

The algorithm argument picks the engine config (algos.py maps algorithm values to engines); the
descriptor's math type sets what the engines may use (lower.build_context: FMA_MATH no tensor cores, no
TF32; TENSOR_OP_MATH / _ALLOW_CONVERSION tensor cores and FP32 as TF32; DEFAULT_MATH tensor cores, FP32 exact).
ConvolutionBiasActivationForward: y = act(alpha1 * conv(x, w) + alpha2 * z + bias) with act RELU or
IDENTITY (IDENTITY only with IMPLICIT_PRECOMP_GEMM, as cuDNN documents; other modes NOT_SUPPORTED).
"""
from ..errors import BadParamError, CudnnError, NotSupportedError, c_api
from ..handle import get_handle_or_raise
from ..ir import ConvDgrad, ConvFprop, ConvWgrad, Reduction
from ..types import (cudnnActivationMode_t, cudnnConvolutionFwdAlgo_t, cudnnPointwiseMode_t, cudnnReduceTensorOp_t,
                     cudnnStatus_t)
from . import algos as A
from . import lower as L
from ._util import desc_arg, enum_arg, host_scalar, need_ptr
from .activation import act_attrs
from .conv_desc import ConvolutionDescriptor
from .op_desc import ActivationDescriptor
from .tensor_desc import FilterDescriptor, TensorDescriptor

S = cudnnStatus_t
PM = cudnnPointwiseMode_t
AM = cudnnActivationMode_t


def conv_attrs(cd):
    return dict(spatial_dims=cd.spatial_dims, mode=cd.mode, stride=cd.stride, pre_padding=cd.pad,
                post_padding=cd.pad, dilation=cd.dilation)


class ConvProblem:
    """One convolution call's descriptors, checked, and how to lower it for a direction."""

    def __init__(self, direction, x, w, y, conv):
        self.direction, self.x, self.w, self.y, self.conv = direction, x, w, y, conv
        want = conv.output_dims(x, w)
        if y.dims != want:
            names = {"fwd": "yDesc", "dgrad": "dyDesc", "wgrad": "dyDesc"}[direction]
            raise BadParamError(f"{names} dims {y.dims}, but the input {x.dims}, filter {w.dims} and the "
                                f"convolution give {want}")
        if direction == "fwd" and x.dtype != y.dtype:
            raise BadParamError(f"xDesc is {x.dtype.name}, yDesc is {y.dtype.name}")

    def key(self, extra=()):
        return ("conv_" + self.direction, self.x.signature(), self.w.signature(), self.y.signature(),
                self.conv.signature(), int(self.conv.math_type)) + tuple(extra)

    def build(self, b, alpha=1.0, beta=0.0):
        """Nodes of the plain convolution with blending; names x, w, y (the output of the direction)."""
        cd, attrs = self.conv, conv_attrs(self.conv)
        blend = L.needs_blend(alpha, beta)
        if self.direction == "fwd":
            xt, wt = b.tensor("x", self.x), b.tensor("w", self.w)
            out = b.anchor_out("conv", self.y.dims) if blend else b.tensor("y", self.y)
            b.add(ConvFprop("conv", {"X": xt, "W": wt}, {"Y": out}, compute_dtype=cd.compute_type, **attrs))
            if blend:
                b.blend(out, "y", self.y, alpha, beta, L.scalar_dtype(self.y.dtype))
        elif self.direction == "dgrad":
            dyt, wt = b.tensor("dy", self.y), b.tensor("w", self.w)
            out = b.anchor_out("dgrad", self.x.dims) if blend else b.tensor("dx", self.x)
            b.add(ConvDgrad("conv_dgrad", {"DY": dyt, "W": wt}, {"DX": out}, compute_dtype=cd.compute_type, **attrs))
            if blend:
                b.blend(out, "dx", self.x, alpha, beta, L.scalar_dtype(self.x.dtype))
        else:
            xt, dyt = b.tensor("x", self.x), b.tensor("dy", self.y)
            out = b.anchor_out("wgrad", self.w.dims) if blend else b.tensor("dw", self.w)
            b.add(ConvWgrad("conv_wgrad", {"X": xt, "DY": dyt}, {"DW": out}, compute_dtype=cd.compute_type, **attrs))
            if blend:
                b.blend(out, "dw", self.w, alpha, beta, L.scalar_dtype(self.w.dtype))

    def lowered(self, h, alpha=1.0, beta=0.0, build=None, extra=()):
        ctx = L.build_context(h, self.conv.math_type)
        # the context's math permissions are in the key: NVIDIA_TF32_OVERRIDE may change between calls
        return L.lower(h, self.key((L.blend_key(alpha, beta), ctx.allow_tf32) + tuple(extra)),
                       build or (lambda b: self.build(b, alpha, beta)), ctx)


def ranked(low):
    return L.heuristics(low)


def algo_config(low, direction, algo):
    """(EngineConfig, Lowered): the best config running ``algo`` on ``low``, else on its unfused variant
    (the convolution apart from its blending epilogue); NOT_SUPPORTED with the reason otherwise."""
    fams = A.SUBSTITUTES[direction].get(algo)
    if not fams:
        raise NotSupportedError(f"{algo.name}: ncudnn has no FFT convolution engine (FFT algorithms are not "
                                "implemented)", S.CUDNN_STATUS_NOT_SUPPORTED)
    r = ranked(low)
    cands = A.configs_for(r, algo, direction)
    if cands:
        return cands[0], low
    alt = low.unfused()
    if alt is not None:
        ra = ranked(alt)
        ca = A.configs_for(ra, algo, direction)
        if ca:
            return ca[0], alt
        r = r or ra
    if not r:
        raise NotSupportedError(L.no_engine_reason((alt or low).graph, low.ctx), S.CUDNN_STATUS_NOT_SUPPORTED)
    have = sorted({f"{ec.name} ({A.config_family(ec, direction).name})" for ec in r})
    raise NotSupportedError(f"{algo.name}: no registered engine of the families {[f.name for f in fams]} runs "
                            f"this convolution; engines that do: {have}", S.CUDNN_STATUS_NOT_SUPPORTED)


def algo_plan(low, direction, algo):
    """(plan, Lowered) running ``algo`` (cached per algorithm)."""
    plans = low.__dict__.setdefault("algo_plans", {})
    p = plans.get(int(algo))
    if p is None:
        ec, used = algo_config(low, direction, algo)
        p = plans[int(algo)] = L.plan_of(low, ec, used)
    return p


def workspace_bytes(ec):
    """Bytes of workspace an EngineConfig's plan takes (plan.py's layout: 256-byte rounding)."""
    ws = int(ec.workspace_size)
    return ws if ec.parts or not ws else (ws + 255) // 256 * 256


def _run(h, prob, algo, bind, al, be, workSpace, workSpaceSizeInBytes, build=None, extra=()):
    low = prob.lowered(h, al, be, build, extra)
    plan = algo_plan(low, prob.direction, algo)
    L.execute(h, low, bind, {"alpha": al, "alpha1": al}, workSpace, workSpaceSizeInBytes or 0, plan)


@c_api(0)
def cudnnConvolutionForward(handle, alpha, xDesc, x, wDesc, w, convDesc, algo, workSpace, workSpaceSizeInBytes,
                            beta, yDesc, y):
    h = get_handle_or_raise(handle)
    xd, wd = desc_arg(xDesc, TensorDescriptor, "xDesc"), desc_arg(wDesc, FilterDescriptor, "wDesc")
    cd, yd = desc_arg(convDesc, ConvolutionDescriptor, "convDesc"), desc_arg(yDesc, TensorDescriptor, "yDesc")
    algo = enum_arg(A.FA, algo, "algo")
    al, be = host_scalar(alpha, "alpha"), host_scalar(beta, "beta")
    need_ptr(x, "x"), need_ptr(w, "w"), need_ptr(y, "y")
    prob = ConvProblem("fwd", xd, wd, yd, cd)
    _run(h, prob, algo, {"x": x, "w": w, "y": y}, al, be, workSpace, workSpaceSizeInBytes)


@c_api(0)
def cudnnConvolutionBackwardData(handle, alpha, wDesc, w, dyDesc, dy, convDesc, algo, workSpace,
                                 workSpaceSizeInBytes, beta, dxDesc, dx):
    h = get_handle_or_raise(handle)
    wd, dyd = desc_arg(wDesc, FilterDescriptor, "wDesc"), desc_arg(dyDesc, TensorDescriptor, "dyDesc")
    cd, dxd = desc_arg(convDesc, ConvolutionDescriptor, "convDesc"), desc_arg(dxDesc, TensorDescriptor, "dxDesc")
    algo = enum_arg(A.DA, algo, "algo")
    al, be = host_scalar(alpha, "alpha"), host_scalar(beta, "beta")
    need_ptr(w, "w"), need_ptr(dy, "dy"), need_ptr(dx, "dx")
    prob = ConvProblem("dgrad", dxd, wd, dyd, cd)
    _run(h, prob, algo, {"w": w, "dy": dy, "dx": dx}, al, be, workSpace, workSpaceSizeInBytes)


@c_api(0)
def cudnnConvolutionBackwardFilter(handle, alpha, xDesc, x, dyDesc, dy, convDesc, algo, workSpace,
                                   workSpaceSizeInBytes, beta, dwDesc, dw):
    h = get_handle_or_raise(handle)
    xd, dyd = desc_arg(xDesc, TensorDescriptor, "xDesc"), desc_arg(dyDesc, TensorDescriptor, "dyDesc")
    cd, dwd = desc_arg(convDesc, ConvolutionDescriptor, "convDesc"), desc_arg(dwDesc, FilterDescriptor, "dwDesc")
    algo = enum_arg(A.WA, algo, "algo")
    al, be = host_scalar(alpha, "alpha"), host_scalar(beta, "beta")
    need_ptr(x, "x"), need_ptr(dy, "dy"), need_ptr(dw, "dw")
    prob = ConvProblem("wgrad", xd, dwd, dyd, cd)
    _run(h, prob, algo, {"x": x, "dy": dy, "dw": dw}, al, be, workSpace, workSpaceSizeInBytes)


@c_api(0)
def cudnnConvolutionBackwardBias(handle, alpha, dyDesc, dy, beta, dbDesc, db):
    h = get_handle_or_raise(handle)
    dyd, dbd = desc_arg(dyDesc, TensorDescriptor, "dyDesc"), desc_arg(dbDesc, TensorDescriptor, "dbDesc")
    al, be = host_scalar(alpha, "alpha"), host_scalar(beta, "beta")
    need_ptr(dy, "dy"), need_ptr(db, "db")
    want = (1, dyd.dims[1]) + (1,) * (dyd.nbDims - 2)
    if dbd.dims != want:
        raise BadParamError(f"dbDesc dims {dbd.dims}, expected {want} for dyDesc {dyd.dims}")
    sdt = L.scalar_dtype(dbd.dtype)

    def build(b):
        dyt = b.tensor("dy", dyd)
        if L.needs_blend(al, be):
            out = b.virtual("dbias", dims=want, dtype=sdt)
            b.blend(out, "db", dbd, al, be, sdt)
        else:
            out = b.tensor("db", dbd)
        b.add(Reduction("bias_grad", {"X": dyt}, {"Y": out}, mode=cudnnReduceTensorOp_t.CUDNN_REDUCE_TENSOR_ADD))

    L.run(h, ("conv_bwd_bias", dyd.signature(), dbd.signature(), L.blend_key(al, be)), build,
          {"dy": dy, "db": db}, {"alpha": al})


@c_api(0)
def cudnnConvolutionBiasActivationForward(handle, alpha1, xDesc, x, wDesc, w, convDesc, algo, workSpace,
                                          workSpaceSizeInBytes, alpha2, zDesc, z, biasDesc, bias, activationDesc,
                                          yDesc, y):
    h = get_handle_or_raise(handle)
    xd, wd = desc_arg(xDesc, TensorDescriptor, "xDesc"), desc_arg(wDesc, FilterDescriptor, "wDesc")
    cd, yd = desc_arg(convDesc, ConvolutionDescriptor, "convDesc"), desc_arg(yDesc, TensorDescriptor, "yDesc")
    bd = desc_arg(biasDesc, TensorDescriptor, "biasDesc")
    ad = desc_arg(activationDesc, ActivationDescriptor, "activationDesc")
    algo = enum_arg(A.FA, algo, "algo")
    a1, a2 = host_scalar(alpha1, "alpha1"), host_scalar(alpha2, "alpha2")
    need_ptr(x, "x"), need_ptr(w, "w"), need_ptr(y, "y"), need_ptr(bias, "bias")
    if ad.mode not in (AM.CUDNN_ACTIVATION_RELU, AM.CUDNN_ACTIVATION_IDENTITY):
        raise CudnnError(f"activation {ad.mode.name}: only RELU and IDENTITY are supported",
                         S.CUDNN_STATUS_NOT_SUPPORTED)
    precomp = cudnnConvolutionFwdAlgo_t.CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM
    if ad.mode == AM.CUDNN_ACTIVATION_IDENTITY and algo != precomp:
        raise CudnnError("CUDNN_ACTIVATION_IDENTITY needs CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM",
                         S.CUDNN_STATUS_NOT_SUPPORTED)
    prob = ConvProblem("fwd", xd, wd, yd, cd)
    want_b = (1, yd.dims[1]) + (1,) * (yd.nbDims - 2)
    if bd.dims != want_b:
        raise BadParamError(f"biasDesc dims {bd.dims}, expected {want_b}")
    if a2 != 0.0:
        zd = desc_arg(zDesc, TensorDescriptor, "zDesc")
        need_ptr(z, "z")
        if zd.dims != yd.dims:
            raise BadParamError(f"zDesc dims {zd.dims} differ from yDesc dims {yd.dims}")
    sdt = L.scalar_dtype(yd.dtype)

    def build(b):
        xt, wt = b.tensor("x", xd), b.tensor("w", wd)
        cur = b.anchor_out("conv", yd.dims)
        b.add(ConvFprop("conv", {"X": xt, "W": wt}, {"Y": cur}, compute_dtype=cd.compute_type, **conv_attrs(cd)))
        if a1 != 1.0:
            nxt = b.virtual("alpha1*conv", dtype=sdt)
            b.pw(PM.CUDNN_POINTWISE_MUL, nxt, "alpha1", X=cur, B=b.scalar("alpha1", yd.nbDims, sdt))
            cur = nxt
        if a2 != 0.0:
            nxt = b.virtual("+alpha2*z", dtype=sdt)
            b.pw(PM.CUDNN_POINTWISE_ADD, nxt, "add_z", X=cur, B=b.tensor("z", zd), alpha2=a2)
            cur = nxt
        relu = ad.mode == AM.CUDNN_ACTIVATION_RELU
        biased = b.virtual("+bias", dtype=sdt) if relu else b.tensor("y", yd)
        b.pw(PM.CUDNN_POINTWISE_ADD, biased, "add_bias", X=cur, B=b.tensor("bias", bd))
        if relu:
            b.pw(PM.CUDNN_POINTWISE_RELU_FWD, b.tensor("y", yd), "relu", X=biased, **act_attrs(ad))

    extra = ("bias_act", bd.signature(), ad.signature(), a2, None if a2 == 0.0 else zd.signature())
    bind = {"x": x, "w": w, "y": y, "bias": bias}
    if a2 != 0.0:
        bind["z"] = z
    low = prob.lowered(h, a1, 0.0, build, extra)
    plan = algo_plan(low, "fwd", algo)
    L.execute(h, low, bind, {"alpha1": a1}, workSpace, workSpaceSizeInBytes or 0, plan)
