"""Engine "conv_gemm_1x1": a 1x1 (1x1x1), stride-1, unpadded, ungrouped convolution forward or data
gradient as one plain GEMM. fprop: rows are the (n, spatial) output pixels, columns the output
channels K, the reduction the input channels C (y = x . w^T). dgrad: rows are the pixels, columns
the input channels C, the reduction the output channels K (dx = dy . w). With NHWC activations the
pixels collapse into one M = N*H*W GEMM; NCHW is a GEMM batched over images (m contiguous).
Dilation does not matter for a 1x1 filter, nor does the mode (a 1x1 filter flips onto itself).
Same fused epilogue (alpha / beta, per-channel bias, pointwise chain, one residual or backward
activation operand) as the implicit-GEMM engines, on the GEMM kernel's plain strided loaders.
"""
from ..types import cudnnBackendLayoutType_t, cudnnStatus_t
from . import gemm_common as gc
from .matmul_common import GemmEngineBase, GemmMapping, batch2, merge_dims
from .registry import register

S = cudnnStatus_t


def conv1x1_mapping(sub):
    node = sub.anchor
    x, w, y = node.conv_tensors()
    dgrad = sub.kind == "conv_dgrad"
    if dgrad:
        x, y = y, x        # the GEMM reads dy (the "input") and writes dx (the "output")
    for port, t in (("X", x), ("W", w), ("Y", y)):
        gc.check_tensor(node, port, t)
    if any(d != 1 for d in w.dims[2:]):
        raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED, f"node '{node.name}': W: filter {w.dims[2:]} is not 1x1")
    if any(s != 1 for s in node.stride):
        raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED, f"node '{node.name}': stride {node.stride} is not 1")
    if any(node.pre_padding) or any(node.post_padding):
        raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED, f"node '{node.name}': padding {node.pre_padding} / "
                        f"{node.post_padding} is not 0")
    if node.groups != 1:
        raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED, f"node '{node.name}': {node.groups} groups (one GEMM "
                        "needs groups = 1)")
    rank = len(y.dims)

    def classify(t):
        if len(t.dims) == rank and t.dims[1] == y.dims[1] and all(d == 1 for i, d in enumerate(t.dims) if i != 1):
            return "col"
        return None

    epi = gc.epilogue_of(sub, y.dims, classify)
    out = epi.out
    if tuple(out.dims) != tuple(y.dims):
        raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED_SHAPE, f"{out.label}: dims {out.dims} differ from the "
                        f"conv output's {y.dims}")
    gc.check_tensor(node, "output", out)
    alpha, beta = float(node.alpha), float(node.beta)
    if beta != 0 and sub.epilogue:
        raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED, f"node '{node.name}': beta = {beta} blends with a "
                        "virtual output (a fused epilogue follows): not supported")
    pix = [0] + list(range(2, rank))          # the (n, spatial) dims: GEMM rows
    tensors = [x, out] + ([epi.residual] if epi.residual is not None else [])
    sizes, strides = merge_dims([y.dims[i] for i in pix], [[t.strides[i] for i in pix] for t in tensors])
    if not sizes:
        sizes, strides = [1], [[0] for _ in tensors]
    M = sizes[-1]
    batch, bs = batch2(sizes[:-1], [s[:-1] for s in strides], f"node '{node.name}'")
    a_st = bs[0] + (strides[0][-1], x.strides[1])
    c_st = bs[1] + (strides[1][-1], out.strides[1])
    # B element (k, n): fprop w[n = out channel, k = in channel]; dgrad w[k = out channel, n = in channel]
    b_st = (0, 0, w.strides[0], w.strides[1]) if dgrad else (0, 0, w.strides[1], w.strides[0])
    res_st = bs[2] + (strides[2][-1], epi.residual.strides[1]) if epi.residual is not None else None
    bias_st = (0, epi.bias.strides[1]) if epi.bias is not None else (0, 1)
    return GemmMapping(M, y.dims[1], x.dims[1], batch, x, w, a_st, b_st, c_st, epi, bias_st, res_st, alpha, beta)


@register
class ConvGemm1x1Engine(GemmEngineBase):
    name = "conv_gemm_1x1"
    kinds = ("conv_fprop", "conv_dgrad")
    TILES = gc.CONV_TILES
    SPLITS = (1, 4)
    SWIZZLES = (1, 8)
    MAX_SPLIT = 16
    preferred_layout = cudnnBackendLayoutType_t.CUDNN_LAYOUT_TYPE_PREFERRED_NHWC

    def mapping(self, sub):
        if sub.kind not in ("conv_fprop", "conv_dgrad"):
            raise gc.Reject(S.CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN, f"{self.name}: conv fprop and dgrad only")
        return conv1x1_mapping(sub)

    def _make_space(self, sub):
        """GemmEngineBase's space (useful tiles x SPLITS when the grid leaves SMs idle x one swizzle),
        made from shared Config objects without helper calls per tile."""
        try:
            p = self.problem(sub)
        except gc.Reject:
            return []
        base, make, T = self.default_config(sub), self._config, self.TILES
        made, bk = self.__dict__.get("_configs") or {}, base.knobs
        M, N, nb = p.M, p.N, p.nb
        small = gc.simulated_small(M, N, nb)          # gc.split_worthwhile, hoisted
        sws = [w for w in self.SWIZZLES if w != 1]
        out = []
        for t in gc.useful_tiles(T, M, N, p.K, nb):
            c = T[t].cfg
            rows = -(-M // c.BLOCK_M)
            splits = self.SPLITS if not small and rows * -(-N // c.BLOCK_N) * nb < 2 * 132 else (1,)
            sw = max([w for w in sws if rows > w] or [1])     # gc.swizzle_for(M, c, SWIZZLES)
            for s in splits:
                for buf in ((1, 0) if self.ATOMIC and s > 1 else (1,)):
                    out.append(made.get((bk, t, s, buf, sw, None)) or make(base, t, s, buf, sw, None))
        return out
