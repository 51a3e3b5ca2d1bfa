"""A plan over an IR Slice node survives the plan JSON round trip (Slice is in NODE_TYPES) and runs the
same copy; the reference oracle slices like NumPy."""
import numpy as np

from ncudnn.engines import api
from ncudnn.reference.ops import run_op

import membound_util as U
from test_slice_engine import oracle, slice_graph


def test_slice_plan_json_round_trip_executes(rng):
    xd, start, limit, steps = (2, 5, 6, 7), (1, 0, 1, 0), (2, 5, 6, 7), (1, 2, 2, 3)
    g, x, y = slice_graph(xd, start, limit, steps)
    plan = api.build_plan(g, api.get_heuristics(g)[0])
    plan2 = api.plan_from_json(api.plan_to_json(plan))
    assert plan2.engine_config.config == plan.engine_config.config
    a = rng.uniform(-3, 3, xd)
    out = U.poisoned(y)
    api.execute(plan2, {x.uid: U.upload(a, x), y.uid: out})
    np.testing.assert_array_equal(U.download(out, y), oracle(U.cast(a, U.F32), start,
                                                                limit, steps))


def test_reference_slice_oracle(rng):
    a = rng.uniform(-1, 1, (3, 4, 5))
    got = run_op("slice", {"X": a}, {"start_indices": [1, 0, 2], "limit_indices": [3, 4, 5],
                                     "strides": [1, 3, 2]}, {"Y": (2, 2, 2)})["Y"]
    np.testing.assert_array_equal(got, a[1:3, 0:4:3, 2:5:2])
