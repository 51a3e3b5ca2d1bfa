"""Pointwise kernels the legacy lowering produces, as JSON specs a child process (simulator off)
compiles for sm_90 (kcache.resource_usage_subprocess factories)."""


def spec_to_json(spec):
    return {"shape": list(spec.shape), "block": spec.block, "unroll": spec.unroll,
            "inputs": [[t.dtype, list(t.strides)] for t in spec.inputs],
            "nodes": [[n.mode, list(n.operands), [[k, v] for k, v in n.params]] for n in spec.nodes],
            "outputs": [[o.ref, o.dtype, list(o.strides), o.saturate] for o in spec.outputs]}


def spec_from_json(d):
    from ncudnn.kernels.pointwise import fused as kpw

    return kpw.PointwiseSpec(
        tuple(d["shape"]), tuple(kpw.TensorSpec(t, tuple(s)) for t, s in d["inputs"]),
        tuple(kpw.NodeSpec(m, tuple(ops), tuple((k, v) for k, v in ps)) for m, ops, ps in d["nodes"]),
        tuple(kpw.OutputSpec(r, t, tuple(s), sat) for r, t, s, sat in d["outputs"]), block=d["block"],
        unroll=d["unroll"])


def build(d):
    from ncudnn.kernels.pointwise import fused as kpw

    return kpw.build_pointwise(spec_from_json(d))


def signature(made):
    from numba.cuda import types
    from numba.cuda.np import numpy_support

    return tuple(types.Array(numpy_support.from_dtype(st), 1, "C") for st in made.storage) + (types.int64,)


def pointwise_specs(graph):
    """PointwiseSpec (JSON) of every pointwise part of a lowered graph, as pointwise_fused builds it."""
    from ncudnn.engines import api
    from ncudnn.engines.composite import CompositeSub
    from ncudnn.engines.pointwise.fused import _layout

    sub = api.problem(graph)
    parts = sub.parts if isinstance(sub, CompositeSub) else [sub]
    return [spec_to_json(_layout(p).spec(256, 4)) for p in parts if p.kind == "pointwise"]
