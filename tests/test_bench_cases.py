"""The benchmark case tables: well-formed, complete, and FLOP / byte formulas equal to hand counts."""
import numpy as np
import pytest

from bench import cases as C
from bench import data


def test_ids_unique_and_every_suite_present():
    all_ = C.all_cases()
    ids = [c.id for c in all_]
    assert len(ids) == len(set(ids))
    assert {c.suite for c in all_} == set(C.SUITES)
    quick = C.select("all", quick=True)
    assert {c.suite for c in quick} == set(C.SUITES)
    assert 0 < len(quick) < len(all_) / 4


def test_resnet50_table():
    assert len(C.RESNET50) == 23 and len({r[0] for r in C.RESNET50}) == 23
    assert sum(r[-1] for r in C.RESNET50) == 53  # 49 convs on the main path + 4 projection shortcuts
    assert set(C.RESNET50_QUICK) <= {r[0] for r in C.RESNET50}
    out = {name: C.conv_out(h, r, s, (r - 1) // 2) for name, c, k, h, r, s, n in C.RESNET50}
    assert out["conv1_7x7"] == 112 and out["c3_3x3_128_s2"] == 28 and out["c5_ds_1024_2048_s2"] == 7
    # every stage's input channels come from the previous layer's outputs
    assert all(c in (3, 64, 128, 256, 512, 1024, 2048) for _, c, *_ in C.RESNET50)
    conv = C.conv_cases()
    assert len(conv) == 2 * (23 * 3 - 1)  # no dgrad of the first layer


def test_conv_formulas_by_hand():
    c = C.by_id("conv/conv_fprop/c2_3x3_64_n32/float32")
    assert c.params["p"] == 56 and c.params["pad"] == 1
    assert c.flops == 2 * 32 * 64 * 56 * 56 * 64 * 3 * 3 == 7_398_752_256
    assert c.bytes == 4 * (32 * 64 * 56 * 56 * 2 + 64 * 64 * 9) == 51_527_680
    d = C.by_id("conv/conv_wgrad/conv1_7x7_n128/float32")
    assert d.params["p"] == 112 and d.params["pad"] == 3
    assert d.flops == 2 * 128 * 64 * 112 * 112 * 3 * 7 * 7
    assert d.bytes == 4 * (128 * 3 * 224 * 224 + 64 * 3 * 49 + 128 * 64 * 112 * 112)


def test_gemm_and_memory_formulas_by_hand():
    g = C.by_id("gemm/matmul/4096x4096x4096/float32")
    assert g.flops == 137_438_953_472 and g.bytes == 3 * 4096 * 4096 * 4
    b = C.by_id("gemm/matmul/128x8192x8192/bfloat16")
    assert b.flops == 2 * 128 * 8192 * 8192 and b.bytes == 2 * (128 * 8192 + 8192 * 8192 + 128 * 8192)
    ln = C.by_id("norm/layernorm_fwd/8192x4096/float32")
    assert ln.bytes == 2 * 8192 * 4096 * 4 == 268_435_456
    pool = C.by_id("pool/max_pool/3x3s2_n32c256h112_nhwc/float32")
    assert pool.params["p"] == 56 and pool.bytes == 4 * 32 * 256 * (112 * 112 + 56 * 56)
    att = C.by_id("attention/sdpa_fwd/b4h16s2048d128_causal/bfloat16")
    assert att.flops == 4 * 4 * 16 * 2048 * 2048 * 128 // 2


def test_attention_cases_by_hand():
    fwd = C.by_id("attention/sdpa_fwd/b4h16s4096d128_causal/bfloat16")
    bwd = C.by_id("attention/sdpa_bwd/b4h16s4096d128_causal/bfloat16")
    assert bwd.flops == fwd.flops * 5 // 2 == 10 * 4 * 16 * 4096 * 4096 * 128 // 2
    n = 4 * 16 * 4096 * 128
    assert bwd.bytes == 2 * 8 * n + 4 * 4 * 16 * 4096   # Q K V O dO read, dQ dK dV written, FP32 stats
    gqa = C.by_id("attention/sdpa_fwd/b4h32kv8s4096d128_causal/bfloat16")
    assert gqa.bytes == 2 * (2 * 4 * 32 * 4096 * 128 + 2 * 4 * 8 * 4096 * 128)
    ins, outs = data.specs(gqa)
    assert ins["k"].dims == (4, 8, 4096, 128) and outs["o"].dims == (4, 32, 4096, 128)
    dec = C.by_id("attention/sdpa_fwd/b16h32kv8q1s8192d128/bfloat16")
    assert dec.flops == 4 * 16 * 32 * 1 * 8192 * 128
    ins, outs = data.specs(dec)
    assert ins["q"].dims == (16, 32, 1, 128) and ins["v"].dims == (16, 8, 8192, 128)
    ins, outs = data.specs(bwd)
    assert set(ins) == {"q", "k", "v", "o", "dO", "stats"} and set(outs) == {"dq", "dk", "dv"}
    assert ins["stats"].dims == (4, 16, 4096, 1) and ins["stats"].dtype == "float32"


def test_backward_inputs_come_from_the_forward():
    """A backward case's o and stats are its q, k, v's forward: exp(S - stats) sums to 1 over the kept keys."""
    case = next(c for c in C.sim_cases() if c.op == "sdpa_bwd")
    t = data.host_inputs(case, seed=3)
    q, k = (t[r].astype(np.float64) for r in ("q", "k"))
    k = np.repeat(k, case.params["h"] // case.params["hk"], axis=1)
    s = q @ np.swapaxes(k, -1, -2) * case.params["d"] ** -0.5
    s = np.where(np.triu(np.ones(s.shape[-2:], bool), 1), -np.inf, s)
    np.testing.assert_allclose(np.exp(s - t["stats"]).sum(axis=-1), 1.0, rtol=1e-5)
    assert np.abs(t["o"].astype(np.float64)).max() > 0.1


@pytest.mark.parametrize("case", C.all_cases() + C.sim_cases(), ids=lambda c: c.id)
def test_specs_match_params(case):
    ins, outs = data.specs(case)
    assert ins and outs
    for s in list(ins.values()) + list(outs.values()):
        assert len(s.dims) == len(s.strides) and all(d > 0 for d in s.dims)
        assert data.span(s) == _prod(s.dims)  # dense: no gaps, no overlap
    if case.suite == "conv":
        p = case.params
        assert case.flops == C.conv_flops(p["n"], p["c"], p["k"], p["p"], p["q"], p["r"], p["s"])
        x = ins.get("x") or outs["dx"]
        assert x.dims == (p["n"], p["c"], p["h"], p["w"]) and x.strides[1] == 1  # channels-last
    assert case.bytes > 0 and case.flops > 0


def _prod(xs):
    out = 1
    for x in xs:
        out *= x
    return out


def test_select():
    assert all(c.suite == "gemm" for c in C.select("gemm"))
    assert len(C.select("gemm")) == 26  # 4 cubes + 7 skinny shapes, FP32 and BF16; TF32 and FP16 4096^3, 8192^3
    assert all(c.quick for c in C.select("conv", quick=True))
    assert all("sim" in c.tags for c in C.select("all", sim=True))
    with pytest.raises(ValueError):
        C.select("bogus")


def test_layout_strides():
    assert data.nhwc((2, 3, 4, 5)) == (60, 1, 15, 3)
    assert data.packed((2, 3, 4, 5)) == (60, 20, 5, 1)
    assert C.geomean([2.0, 0.5, None, float("nan")]) == pytest.approx(1.0)


@pytest.mark.parametrize("case_id", ["conv/conv_fprop/c2_3x3_64_n32/float32", "gemm/matmul/1024x1024x1024/float32",
                                     "gemm/matmul/1024x1024x1024/bfloat16", "norm/layernorm_fwd/8192x4096/float32",
                                     "pointwise/relu/67108864/float32"])
def test_impl_names_match_the_runners(case_id):
    """The pytest-benchmark parametrization lists exactly the implementations the runners build."""
    from bench import ncudnn_runners, ref_runners
    from bench.suite import impl_names

    case = C.by_id(case_id)
    built = ncudnn_runners.impls(case, {}, True, tune=True) + ref_runners.torch_impls(case, {}) \
        + ref_runners.fe_impls(case, {})
    assert [i.name for i in built] == impl_names(case, tune=True)


def test_every_case_graph_validates_in_ncudnn():
    """The graphs the GPU run builds are well-formed now (dims, strides, types infer and agree), so a case
    there can only fail for a missing engine, which the report names."""
    import ncudnn

    from bench import graphs

    for case in C.all_cases():
        try:
            g, T, scalars = graphs.build(ncudnn, case, None)
        except graphs.Unsupported:
            continue
        g.validate()
        _, outs = data.specs(case)
        for role, spec in outs.items():
            if role in T:
                assert tuple(T[role].get_dim()) == spec.dims and tuple(T[role].get_stride()) == spec.strides


def test_filter_terms_any_and_none_of():
    ids = [c.id for c in C.select("all")]
    conv32 = [i for i in ids if C.matches(i, "conv/,!_n128")]
    assert conv32 and all(i.startswith("conv/") and "_n128" not in i for i in conv32)
    rest = [i for i in ids if C.matches(i, "_n128,gemm/")]
    assert rest and all("_n128" in i or i.startswith("gemm/") for i in rest)
    assert C.matches("conv/conv_fprop/x_n32/float32", "") and not C.matches("gemm/matmul/8x8x8/float32", "!gemm")
