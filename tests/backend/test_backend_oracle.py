"""Every operation the lowering tests build, executed through the backend API (heuristics -> plan ->
variant pack -> execute) once an engine runs it, against the float64 graph oracle
(``ncudnn.reference.ops.run_graph``) on fresh random inputs with poisoned outputs. Until then the
case asserts the documented NOT_SUPPORTED answers and skips, saying which operation waits for an engine."""
import numpy as np
import pytest
from numba import cuda

import test_backend_conv_ops as conv_cases
import test_backend_execute_ops as execute_ops
import test_backend_lowering as lowering
import test_backend_ops as op_cases
from backend_build import conv_desc, conv_op, graph, pointwise_desc, pointwise_op, tensor
from ncudnn.ir import numpy_dtype
from ncudnn.reference.ops import run_graph, run_node
from ncudnn.testing import assert_close, poison_value, random
from ncudnn.types import cudnnPointwiseMode_t as P


def chain():
    """A three-node pointwise DAG with broadcasting: (x * b) then tanh then + c."""
    x, b, c = tensor(1, [2, 3, 4]), tensor(2, [1, 3, 1]), tensor(3, [2, 3, 4])
    t1, t2, y = tensor(4, [2, 3, 4], virtual=True), tensor(5, [2, 3, 4], virtual=True), tensor(6, [2, 3, 4])
    return [pointwise_op(pointwise_desc(P.CUDNN_POINTWISE_MUL), x=x, b=b, y=t1),
            pointwise_op(pointwise_desc(P.CUDNN_POINTWISE_TANH_FWD), x=t1, y=t2),
            pointwise_op(pointwise_desc(P.CUDNN_POINTWISE_ADD), x=t2, b=c, y=y)]


def small_grouped_conv(kind, beta=0.0):
    """The reference's grouped 3-D convolution (6-d tensors) at simulator size."""
    x, w, y = conv_cases.grouped_tensors(n=1, g=2, c=2, k=2, d=2, h=4, w=4)
    return conv_op(kind, x, w, y, conv_desc(3), beta=beta)


CASES = {name: (lambda b=build: [b()]) for name, (build, *_rest) in lowering.CASES.items()}
CASES["pointwise_chain"] = chain
CASES["conv_fprop"] = lambda: [small_grouped_conv(conv_cases.FWD, beta=0.5)]
CASES["conv_dgrad"] = lambda: [small_grouped_conv(conv_cases.DGRAD)]
CASES["conv_wgrad"] = lambda: [small_grouped_conv(conv_cases.WGRAD)]
CASES["bn_bwd_weights"] = lambda: [op_cases.bn_bwd_weights()]  # lowered to 4 nodes: sums feed the IR node
CASES["resample_fwd_max"] = lambda: [op_cases.resample_fwd()]  # max pooling without the index output


def _bn_finalize_inputs(rng):
    """Statistics that belong together: sqsum >= sum^2 / count, an integral count, a small epsilon."""
    count = 16.0
    total = rng.uniform(-4.0, 4.0, (1, 8, 1, 1)).astype(np.float32)
    sqsum = (total.astype(np.float64) ** 2 / count + rng.uniform(0.5, 2.0, (1, 8, 1, 1))).astype(np.float32)
    return {10: total, 11: sqsum, 30: np.full((1, 1, 1, 1), count, np.float32),
            31: np.full((1, 1, 1, 1), 1e-5, np.float32), 32: np.full((1, 1, 1, 1), 0.1, np.float32)}


#: case -> uid -> values, where random ones would be meaningless
PURPOSE_MADE = {"bn_finalize": _bn_finalize_inputs}


def strided(t, values=None):
    """A float32 buffer spanning ``t``'s dims and strides: poison, with ``values`` written at the strides."""
    buf = np.full(t.span_elements(), poison_value(np.float32), np.float32)
    if values is not None:
        np.lib.stride_tricks.as_strided(buf, t.dims, [s * 4 for s in t.strides])[...] = values
    return buf


@pytest.mark.parametrize("case", list(CASES))
def test_operation_matches_the_graph_oracle(case, rng):
    g = graph(CASES[case]())
    ir = g.state["graph"]
    produced = {t.uid for n in ir.nodes for t in n.outputs.values()}
    tensors = {u: t for u, t in ir.tensors().items() if not t.is_virtual}
    if any(numpy_dtype(t.dtype) is None or numpy_dtype(t.dtype).kind != "f" for t in tensors.values()):
        pytest.skip(f"{case}: integer / packed tensors need purpose-made inputs")
    blended = {port: t.uid for n in ir.nodes if getattr(n, "beta", 0.0) for port, t in n.outputs.items()}
    inputs, buffers, outputs, priors = {}, {}, {}, {}
    made = PURPOSE_MADE[case](rng) if case in PURPOSE_MADE else {}
    for uid, t in sorted(tensors.items()):
        if uid in produced:
            if uid in blended.values():  # beta != 0 blends the prior output: give it one
                priors[uid] = random(rng, t.dims, np.float32, -1.0, 1.0)
            outputs[uid] = buffers[uid] = cuda.to_device(strided(t, priors.get(uid)))
            continue
        v = made[uid] if uid in made else random(rng, t.dims, np.float32, 0.5, 1.5)
        inputs[uid] = v
        if t.is_by_value:
            buffers[uid] = float(v.reshape(-1)[0])
            t.value = buffers[uid]
        else:
            buffers[uid] = cuda.to_device(strided(t, v))
    execute_ops.run(g, buffers)
    if blended:
        (node,) = ir.nodes
        ins = {p: inputs[t.uid] for p, t in node.inputs.items()}
        ins.update({f"{p}_PRIOR": priors[u] for p, u in blended.items()})
        expected = {node.outputs[p].uid: v for p, v in run_node(node, ins).items()}
    else:
        expected = run_graph(ir, inputs)
    for uid, dev in outputs.items():
        t = tensors[uid]
        got = np.lib.stride_tricks.as_strided(dev.copy_to_host(), t.dims, [s * 4 for s in t.strides])
        assert_close(got, expected[uid], "float32", name=f"{case} uid {uid}")
