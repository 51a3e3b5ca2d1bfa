"""Every op method family: argument names, return conventions, output names, and the IR node each
validates into (shapes inferred by the IR)."""
import pytest

import ncudnn as cudnn
from ncudnn.frontend import ops_pointwise
from ncudnn.types import cudnnPointwiseMode_t as M, cudnnStatus_t as S

F = cudnn.data_type.FLOAT


def graph():
    return cudnn.pygraph(io_data_type=F, intermediate_data_type=F, compute_data_type=F)


def t(g, name, dims, **kw):
    return g.tensor(name=name, dim=dims, **kw)


def ir_node(g, name):
    return next(n for n in g.ir.nodes if n.name == name)


@pytest.mark.parametrize("op", sorted(set(ops_pointwise.SPEC) | set(ops_pointwise.WITH_ATTRS)))
def test_every_pointwise_method_builds_its_mode(op):
    g = graph()
    mode, names = (ops_pointwise.WITH_ATTRS[op] if op in ops_pointwise.WITH_ATTRS else ops_pointwise.SPEC[op])[:2]
    args = {n: t(g, n, [2, 3]) for n in names}
    if op == "gen_index":
        args["axis"] = 1
    if op.startswith("leaky_relu"):
        args["negative_slope"] = 0.2
    out = getattr(g, op)(**args, name="p")
    out.set_output(True)
    g.validate()
    node = ir_node(g, "p")
    assert node.mode == mode and out.get_name() == "p::OUT_0" and out.get_dim() == [2, 3]
    ins, port = node.operand_ports()
    assert [node.inputs[p].name for p in ins] == list(names) and node.outputs[port] is out.desc


def test_pointwise_positional_scalars_and_attributes():
    g = graph()
    X = t(g, "X", [2, 3, 4])
    Y = g.relu(X, 0.1, -1.0, 6.0, name="r")  # negative_slope, lower_clip, upper_clip
    Z = g.add(Y, 2.5, name="a")  # a number becomes a by-value scalar broadcast to X's rank
    Z.set_output(True)
    g.validate()
    r = ir_node(g, "r")
    assert (r.relu_lower_clip_slope, r.relu_lower_clip, r.relu_upper_clip) == (0.1, -1.0, 6.0)
    b = ir_node(g, "a").inputs["B"]
    assert b.is_by_value and b.dims == (1, 1, 1) and float(b.value) == 2.5
    with pytest.raises(TypeError, match="negative_slope"):
        g.leaky_relu(X)
    with pytest.raises(TypeError, match="unexpected"):
        g.add(a=X, b=X, c=X)


def test_binary_select_and_compare():
    g = graph()
    a, b = t(g, "a", [4]), t(g, "b", [4])
    mask = g.cmp_gt(input=a, comparison=b)
    out = g.binary_select(input0=a, input1=b, mask=mask, name="sel")
    out.set_output(True)
    g.validate()
    sel = ir_node(g, "sel")
    assert sel.inputs["T"] is mask.desc and sel.inputs["X"] is a.desc and sel.inputs["B"] is b.desc
    assert mask.get_data_type() == cudnn.data_type.BOOLEAN


def test_conv_family_and_matmul():
    g = graph()
    X = t(g, "X", [2, 4, 9, 9])
    W = t(g, "W", [8, 4, 3, 3])
    Y = g.conv_fprop(X, W, padding=[1, 1], stride=[2, 2], name="c")
    DX = g.conv_dgrad(loss=Y, filter=W, padding=[1, 1], stride=[2, 2], name="dg")
    DX.set_output(True).set_dim([2, 4, 9, 9])
    DW = g.conv_wgrad(image=X, loss=Y, pre_padding=[1, 1], post_padding=[1, 1], stride=[2, 2], name="wg")
    DW.set_output(True).set_dim([8, 4, 3, 3])
    A, B = t(g, "A", [3, 4, 5]), t(g, "B", [1, 5, 6])
    C = g.matmul(A, B, name="mm")
    C.set_output(True)
    g.validate()
    assert Y.get_dim() == [2, 8, 5, 5] and Y.get_name() == "c::Y"
    assert (DX.get_name(), DW.get_name(), C.get_name()) == ("dg::DX", "wg::DW", "mm::C")
    assert C.get_dim() == [3, 4, 6]
    c = ir_node(g, "c")
    assert (c.stride, c.pre_padding, c.dilation, c.spatial_dims) == ((2, 2), (1, 1), (1, 1), 2)
    assert int(c.mode) == int(cudnn.convolution_mode.CROSS_CORRELATION)
    g2 = graph()
    X = t(g2, "X", [1, 2, 5])
    W = t(g2, "W", [3, 2, 2])
    y = g2.conv_fprop(X, W, convolution_mode=cudnn.convolution_mode.CONVOLUTION, name="c1")  # 1-d, defaults
    y.set_output(True)
    g2.validate()
    assert y.get_dim() == [1, 3, 4] and int(ir_node(g2, "c1").mode) == 0


def test_batchnorm_family():
    g = graph()
    x = t(g, "x", [4, 3, 2, 2])
    ch = lambda n: t(g, n, [1, 3, 1, 1])  # noqa: E731
    eps = g.tensor_scalar(1e-5, cudnn.scalar_type.RUNTIME_PARAM, name="eps")
    mom = g.tensor(name="mom", dim=[1, 1, 1, 1], stride=[1, 1, 1, 1], is_pass_by_value=True)
    outs = g.batchnorm(input=x, scale=ch("s"), bias=ch("b"), in_running_mean=ch("rm"), in_running_var=ch("rv"),
                       epsilon=eps, momentum=mom, name="bn")
    assert len(outs) == 5 and [o.get_name() for o in outs] == [
        "bn::Y", "bn::MEAN", "bn::INV_VARIANCE", "bn::NEXT_RUNNING_MEAN", "bn::NEXT_RUNNING_VAR"]
    for o in outs:
        o.set_output(True)
    y, mean, inv_var = g.batchnorm(input=x, scale=ch("s2"), bias=ch("b2"), epsilon=1e-3, momentum=0.1,
                                   name="bn2")[:3]  # momentum without running statistics: unused
    bn3 = g.batchnorm(input=x, scale=ch("s3"), bias=ch("b3"), epsilon=1e-3, name="bn3")
    assert bn3[3:] == [None, None]
    for o in bn3[:3]:
        o.set_output(True)
    for o in (y, mean, inv_var):
        o.set_output(True)
    g.validate()
    assert outs[1].get_dim() == [1, 3, 1, 1] and outs[0].get_dim() == [4, 3, 2, 2]
    assert ir_node(g, "bn").inputs["EXP_AVG_FACTOR"] is mom.desc
    g2 = graph()
    x = t(g2, "x", [4, 3, 2, 2])
    ch = lambda n: t(g2, n, [1, 3, 1, 1])  # noqa: E731
    y = g2.batchnorm_inference(input=x, mean=ch("m"), inv_variance=ch("iv"), scale=ch("s"), bias=ch("b"), name="bi")
    dx, ds, db = g2.batchnorm_backward(grad=y, input=x, scale=ch("s2"), mean=ch("m2"), inv_variance=ch("iv2"))
    for o in (dx, ds, db):
        o.set_output(True)
    g2.validate()
    assert int(ir_node(g2, "bi").phase) == int(cudnn.norm_forward_phase.INFERENCE)
    assert (dx.get_dim(), ds.get_dim(), ds.get_name()) == ([4, 3, 2, 2], [1, 3, 1, 1], "batchnorm_backward.0::DSCALE")
    with pytest.raises(cudnn.cudnnGraphNotSupportedError, match="peer_stats"):
        g3 = graph()
        x = t(g3, "x", [2, 3, 1, 1])
        o = g3.batchnorm(input=x, scale=t(g3, "s", [1, 3, 1, 1]), bias=t(g3, "b", [1, 3, 1, 1]), epsilon=1e-5,
                         peer_stats=[t(g3, "p", [2, 4, 3, 1, 1])])
        for v in o[:3]:
            v.set_output(True)
        g3.validate()


def test_layer_rms_instance_norm_and_genstats():
    g = graph()
    x = t(g, "x", [6, 8, 1, 1])
    sc = t(g, "sc", [1, 8, 1, 1])
    y, mean, inv = g.layernorm(input=x, scale=sc, bias=t(g, "b", [1, 8, 1, 1]), epsilon=1e-5,
                               norm_forward_phase=cudnn.norm_forward_phase.TRAINING, name="ln")
    for o in (y, mean, inv):
        o.set_output(True)
    yi, m2, i2 = g.layernorm(input=x, scale=sc, bias=t(g, "b2", [1, 8, 1, 1]), epsilon=1e-5,
                             norm_forward_phase=cudnn.norm_forward_phase.INFERENCE)
    assert m2 is None and i2 is None
    yi.set_output(True)
    yr, ir_ = g.rmsnorm(input=x, scale=sc, epsilon=1e-5, norm_forward_phase=cudnn.norm_forward_phase.TRAINING)
    yr.set_output(True)
    ir_.set_output(True)
    dx, ds, db = g.rmsnorm_backward(grad=y, input=x, scale=sc, inv_variance=ir_, has_dbias=False)
    assert db is None and ds.get_name().endswith("::Dscale")
    dx.set_output(True)
    ds.set_output(True)
    s, sq = g.genstats(input=x, name="gs")
    s.set_output(True)
    sq.set_output(True)
    yn, mn, ivn = g.instancenorm(input=x, scale=sc, bias=t(g, "b3", [1, 8, 1, 1]), epsilon=1e-5)
    for o in (yn, mn, ivn):
        o.set_output(True)
    g.validate()
    assert mean.get_dim() == [6, 1, 1, 1] and ir_.get_dim() == [6, 1, 1, 1] and mn.get_dim() == [6, 8, 1, 1]
    assert (s.get_name(), sq.get_name(), s.get_dim()) == ("gs::SUM", "gs::SQ_SUM", [1, 8, 1, 1])
    g2 = graph()
    x = t(g2, "x", [6, 8, 1, 1])
    outs = g2.adalayernorm(input=x, scale=t(g2, "s", [6, 8, 1, 1]), bias=t(g2, "b", [6, 8, 1, 1]), epsilon=1e-5)
    for o in outs:
        o.set_output(True)
    g2.validate()          # adaptive layer norm: a scale row per batch entry (tests/engines/norm/test_adalayernorm.py)
    assert outs[1].get_dim() == [6, 1, 1, 1]


def test_reduction_reshape_concatenate():
    g = graph()
    x = t(g, "x", [2, 3, 4])
    r = g.reduction(input=x, mode=cudnn.reduction_mode.MAX, name="red")
    r.set_output(True).set_dim([2, 1, 4])
    rs = g.reshape(x, name="rs")
    rs.set_output(True).set_dim([6, 4]).set_stride([4, 1])
    cat = g.concatenate(inputs=[x, t(g, "z", [2, 5, 4])], axis=1, name="cat")
    cat.set_output(True)
    g.validate()
    assert r.get_name() == "red::OUT_0" and ir_node(g, "red").reduced_axes() == (1,)
    assert cat.get_dim() == [2, 8, 4] and rs.get_dim() == [6, 4]
    g2 = graph()
    g2.reduction(input=t(g2, "x", [2, 3]), mode=cudnn.reduction_mode.ADD).set_output(True)
    with pytest.raises(cudnn.cudnnGraphBadParamError, match="dims must be given"):
        g2.validate()


def test_resample_pooling_and_rng():
    g = graph()
    x = t(g, "x", [1, 2, 6, 6])
    y, idx = g.resample(x, mode=cudnn.resample_mode.MAXPOOL, window=[2, 2], stride=[2, 2], generate_index=True,
                        name="pool")
    y.set_output(True)
    idx.set_output(True)
    a = g.avg_pool(x, window=[3, 3], stride=[1, 1], padding=[1, 1], name="avg")
    a.set_output(True)
    dx = g.resample_backward(grad=y, index=idx, mode=cudnn.resample_mode.MAXPOOL, window=[2, 2], stride=[2, 2],
                             name="pool_bwd")
    dx.set_output(True).set_dim([1, 2, 6, 6])
    r = g.rng(distribution=cudnn.rng_distribution.NORMAL, normal_std=2.0, seed=7, offset=1, dim=[2, 3],
              stride=[3, 1], name="rng")
    r.set_output(True)
    g.validate()
    assert y.get_dim() == [1, 2, 3, 3] and idx.get_data_type() == cudnn.data_type.INT32 and a.get_dim() == [1, 2, 6, 6]
    assert (y.get_name(), idx.get_name(), r.get_name()) == ("pool::Y", "pool::Index", "rng::OUT_0")
    rn = ir_node(g, "rng")
    assert rn.normal_std == 2.0 and rn.inputs["SEED"].is_by_value and r.get_dim() == [2, 3]


def test_sdpa_forward_backward():
    g = cudnn.pygraph(io_data_type=cudnn.data_type.HALF, intermediate_data_type=F, compute_data_type=F)
    q, k, v = t(g, "q", [2, 4, 8, 16]), t(g, "k", [2, 2, 10, 16]), t(g, "v", [2, 2, 10, 32])
    o, stats = g.sdpa(q, k, v, attn_scale=0.25, generate_stats=True, use_causal_mask=True, name="att")
    o.set_output(True)
    stats.set_output(True).set_data_type(F)
    dq, dk, dv = g.sdpa_backward(q, k, v, o, t(g, "dO", [2, 4, 8, 32]), stats, attn_scale=0.25, name="att_bwd")
    for x in (dq, dk, dv):
        x.set_output(True)
    o2, s2 = g.sdpa(q, k, v, is_inference=True, dropout=(0.1, 1234, 5), name="att2")
    assert s2 is None
    o2.set_output(True)
    g.validate()
    assert (o.get_dim(), stats.get_dim(), dk.get_dim()) == ([2, 4, 8, 32], [2, 4, 8, 1], [2, 2, 10, 16])
    assert (o.get_name(), stats.get_name(), dq.get_name()) == ("att::O", "att::Stats", "att_bwd::dQ")
    n = ir_node(g, "att")
    assert n.causal_mask and n.attn_scale == 0.25 and n.generate_stats
    n2 = ir_node(g, "att2")
    assert n2.dropout_probability == 0.1 and n2.inputs["SEED"].is_by_value and not n2.generate_stats
    g3 = graph()
    q = t(g3, "q", [1, 1, 4, 8])
    g3.sdpa(q, q, q, generate_stats=False, paged_attention_max_seq_len_kv=16, name="al")[0].set_output(True)
    with pytest.raises(cudnn.cudnnGraphNotSupportedError) as e:
        g3.validate()
    assert "paged_attention_max_seq_len_kv" in str(e.value) and e.value.status == S.CUDNN_STATUS_NOT_SUPPORTED


def test_out_dims_and_phase_first_call_style():
    g = graph()
    x = t(g, "x", [2, 3, 4])
    r = g.reduction(x, cudnn.reduction_mode.ADD, out_dims=[2, 3, 1], name="red")
    r.set_output(True)
    xs = t(g, "xs", [4, 6, 1, 1])
    y, mean, inv = g.layernorm(cudnn.norm_forward_phase.INFERENCE, xs, t(g, "s", [1, 6, 1, 1]),
                               t(g, "b", [1, 6, 1, 1]), 1e-5, name="ln")
    assert mean is None and inv is None
    y.set_output(True)
    g.validate()
    assert r.get_dim() == [2, 3, 1] and r.get_stride() == [3, 1, 1]
    assert int(ir_node(g, "ln").phase) == int(cudnn.norm_forward_phase.INFERENCE)


def test_modes_pointwise_enum_matches_ir():
    assert int(cudnn.pointwise_mode.RELU_FWD) == int(M.CUDNN_POINTWISE_RELU_FWD)
