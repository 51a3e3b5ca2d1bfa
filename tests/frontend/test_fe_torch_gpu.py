"""On the GPU machine, with torch installed: code written for real cuDNN, run after `import ncudnn as
cudnn`, on torch tensors, checked against torch's own results. Skipped without a GPU or torch (the
rest of the suite is torch-free)."""
import pytest

import ncudnn as cudnn

from fe_oracle import has_engine

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")


def test_pointwise_graph_on_torch_tensors():
    x = torch.randn(8, 64, 56, 56, device="cuda", dtype=torch.float16).to(memory_format=torch.channels_last)
    b = torch.randn(1, 64, 1, 1, device="cuda", dtype=torch.float16)
    y = torch.empty_like(x)
    handle = cudnn.create_handle()
    cudnn.set_stream(handle, torch.cuda.current_stream().cuda_stream)
    g = cudnn.pygraph(handle=handle, io_data_type=torch.float16, intermediate_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT)
    X, B = g.tensor_like(x), g.tensor_like(b)
    assert X.get_stride() == list(x.stride()) and X.get_data_type() == cudnn.data_type.HALF
    scale = g.tensor(name="scale", dim=[1, 1, 1, 1], stride=[1, 1, 1, 1], is_pass_by_value=True,
                     data_type=cudnn.data_type.FLOAT)
    Y = g.relu(input=g.scale(input=g.bias(input=X, bias=B), scale=scale))
    Y.set_output(True).set_dim(list(y.size())).set_stride(list(y.stride()))
    g.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    ws = torch.empty(g.get_workspace_size(), device="cuda", dtype=torch.uint8)
    g.execute({X: x, B: b, scale: torch.full((1, 1, 1, 1), 0.5), Y: y}, ws, handle=handle)
    torch.cuda.synchronize()
    ref = torch.relu((x.float() + b.float()) * 0.5)
    assert (y.float() - ref).abs().max().item() <= 2e-3 * ref.abs().max().item()
    cudnn.destroy_handle(handle)


@pytest.mark.skipif(not has_engine("conv_fprop"), reason="no conv_fprop engine registered yet")
def test_seed_conv_bias_relu_on_torch():
    n, c, h, w, k = 8, 64, 28, 28, 128
    x = torch.randn(n, c, h, w, device="cuda", dtype=torch.float16).to(memory_format=torch.channels_last)
    wt = torch.randn(k, c, 3, 3, device="cuda", dtype=torch.float16).to(memory_format=torch.channels_last)
    b = torch.randn(1, k, 1, 1, device="cuda", dtype=torch.float16)
    y = torch.empty(n, k, h, w, device="cuda", dtype=torch.float16).to(memory_format=torch.channels_last)
    handle = cudnn.create_handle()
    g = cudnn.pygraph(handle=handle, name="conv_bias_relu", io_data_type=cudnn.data_type.HALF,
                      intermediate_data_type=cudnn.data_type.FLOAT, compute_data_type=cudnn.data_type.FLOAT)
    X = g.tensor(name="X", dim=list(x.size()), stride=list(x.stride()), data_type=x.dtype)
    W = g.tensor(name="W", dim=list(wt.size()), stride=list(wt.stride()), data_type=wt.dtype)
    B = g.tensor(name="bias", dim=list(b.size()), stride=list(b.stride()), data_type=b.dtype)
    conv = g.conv_fprop(image=X, weight=W, padding=[1, 1], stride=[1, 1], dilation=[1, 1],
                        compute_data_type=cudnn.data_type.FLOAT)
    Y = g.relu(input=g.bias(input=conv, bias=B))
    Y.set_output(True).set_data_type(cudnn.data_type.HALF)
    Y.set_dim(list(y.size())).set_stride(list(y.stride()))
    g.validate()
    g.build_operation_graph()
    g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    g.check_support()
    g.build_plans()
    ws = torch.empty(max(g.get_workspace_size(), 1), device="cuda", dtype=torch.uint8)
    g.execute({X: x, W: wt, B: b, Y: y}, ws, handle=handle)
    torch.cuda.synchronize()
    ref = torch.relu(torch.nn.functional.conv2d(x, wt, bias=b.flatten(), padding=1)).float()
    err = (y.float() - ref).abs().max().item()
    assert err / max(ref.abs().max().item(), 1e-9) < 5e-2
    cudnn.destroy_handle(handle)
