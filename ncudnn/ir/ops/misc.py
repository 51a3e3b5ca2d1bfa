"""Nodes with little shape logic: RNG, signal, block-scale quantize / dequantize, paged cache load."""
from ...types import cudnnRngDistribution_t, cudnnSignalMode_t, cudnnStatus_t
from ..node import REQUIRED, Node

S = cudnnStatus_t


class Rng(Node):
    OP = "rng"
    INPUTS = ()
    OPTIONAL_INPUTS = ("SEED", "OFFSET")
    OUTPUTS = ("Y",)
    SCALAR_PORTS = ("SEED", "OFFSET")
    ATTRS = {"distribution": cudnnRngDistribution_t.CUDNN_RNG_DISTRIBUTION_BERNOULLI,
             "normal_mean": 0.0, "normal_std": 1.0, "uniform_min": 0.0, "uniform_max": 1.0,
             "bernoulli_probability": 0.5, "seed": 0}

    def pre_validate(self, ctx):
        super().pre_validate(ctx)
        self.distribution = cudnnRngDistribution_t(int(self.distribution))
        if self.outputs["Y"].dims is None:
            self.fail(S.CUDNN_STATUS_BAD_PARAM, "Y", "dims must be given")
        if not 0.0 <= float(self.bernoulli_probability) <= 1.0:
            self.fail(S.CUDNN_STATUS_BAD_PARAM, "bernoulli_probability", "must be in [0, 1]")
        if float(self.normal_std) < 0:
            self.fail(S.CUDNN_STATUS_BAD_PARAM, "normal_std", "must be >= 0")

    def infer(self, ctx):
        self.infer_output("Y", self.outputs["Y"].dims, ctx)


class Signal(Node):
    OP = "signal"
    INPUTS = ("FLAG",)
    OPTIONAL_INPUTS = ("X",)
    OPTIONAL_OUTPUTS = ("Y",)
    ATTRS = {"mode": cudnnSignalMode_t.CUDNN_SIGNAL_SET, "value": 0}

    def infer(self, ctx):
        if "Y" in self.outputs and "X" in self.inputs:
            self.infer_output("Y", self.inputs["X"].dims, ctx, like=self.inputs["X"])


class BlockScaleQuantize(Node):
    OP = "block_scale_quantize"
    INPUTS = ("X",)
    OUTPUTS = ("Y", "SCALE")
    ATTRS = {"block_size": REQUIRED, "math_precision": None, "axis": -1, "transpose": False}

    def pre_validate(self, ctx):
        super().pre_validate(ctx)
        if int(self.block_size) <= 0:
            self.fail(S.CUDNN_STATUS_BAD_PARAM, "block_size", "must be positive")

    def infer(self, ctx):
        x = self.inputs["X"]
        self.infer_output("Y", x.dims, ctx, like=x)
        d = list(x.dims)
        ax = int(self.axis) % len(d)
        if d[ax] % int(self.block_size):
            self.fail(S.CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH, "X", f"dim {ax} not a multiple of block size")
        d[ax] //= int(self.block_size)
        self.infer_output("SCALE", d, ctx, like=x)


class BlockScaleDequantize(Node):
    OP = "block_scale_dequantize"
    INPUTS = ("X", "SCALE")
    OUTPUTS = ("Y",)
    ATTRS = {"block_size": REQUIRED, "math_precision": None}

    def infer(self, ctx):
        self.infer_output("Y", self.inputs["X"].dims, ctx, like=self.inputs["X"])


class PagedCacheLoad(Node):
    OP = "paged_cache_load"
    INPUTS = ("CONTAINER", "PAGE_TABLE", "SEQUENCE")
    OUTPUTS = ("Y",)
    ATTRS = {}

    def pre_validate(self, ctx):
        super().pre_validate(ctx)
        if self.outputs["Y"].dims is None:
            self.fail(S.CUDNN_STATUS_BAD_PARAM, "Y", "dims must be given")

    def infer(self, ctx):
        self.infer_output("Y", self.outputs["Y"].dims, ctx, like=self.inputs["CONTAINER"])
