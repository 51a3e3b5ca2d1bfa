"""The sugar around pygraph: the graph() context manager, @jit / @graph_cache, and the Graph wrapper
that takes device arrays as op arguments and runs as a function (numba arrays in the simulator)."""
import numpy as np
from numba import cuda

import ncudnn as cudnn
from ncudnn.testing import assert_close, random, size

SHAPE = size((3, 4, 5), (64, 128, 256))


def test_graph_context_jit_and_cache(rng):
    h = cudnn.create_handle()
    builds = []

    @cudnn.graph_cache(key_fn=lambda shape: tuple(shape))
    @cudnn.jit(heur_modes=[cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    def make(shape):
        builds.append(shape)
        with cudnn.graph(h, io_data_type=cudnn.data_type.FLOAT) as (g, _):
            X = g.tensor(name="X", dim=list(shape), stride=None)
            Y = g.tanh(input=g.mul(a=X, b=X))
            Y.set_output(True)
            return g, [X, Y]

    g, (ux, uy) = make(SHAPE)
    assert make(SHAPE)[0] is g and len(builds) == 1
    assert g.get_selected_plan_index() is not None
    x = random(rng, SHAPE)
    y = cuda.to_device(np.full(SHAPE, np.nan, np.float32))
    g.execute({ux: cuda.to_device(x), uy: y}, None, handle=h)
    assert_close(y.copy_to_host(), np.tanh(x.astype(np.float64) ** 2), "float32")
    cudnn.destroy_handle(h)


def test_graph_wrapper_positional_and_dict_calls(rng):
    x = cuda.to_device(random(rng, SHAPE))
    b = cuda.to_device(random(rng, (1,) + SHAPE[1:]))
    with cudnn.Graph(io_data_type=cudnn.data_type.FLOAT, compute_data_type=cudnn.data_type.FLOAT) as g:
        y = g.sigmoid(input=g.add(a=x, b=b, name="add"), name="sig")
        y.set_output(True)
    g.set_io_tuples(["add::a", "add::b"], ["sig::OUT_0"])
    x2, b2 = random(rng, SHAPE), random(rng, (1,) + SHAPE[1:])
    out = g(cuda.to_device(x2), cuda.to_device(b2))
    assert_close(out.copy_to_host(), 1 / (1 + np.exp(-(x2.astype(np.float64) + b2))), "float32")
    d = g({"add::a": x})  # b stays the array captured at construction; the output is allocated
    assert_close(d["sig::OUT_0"].copy_to_host(),
                 1 / (1 + np.exp(-(x.copy_to_host().astype(np.float64) + b.copy_to_host()))), "float32")
