"""`ncudnn demo`: an mnistCUDNN-style program written only against the legacy cuDNN API.

A LeNet-like network with deterministic synthetic weights classifies a few synthetic "digit" images:

    conv1 -> +bias -> maxpool -> conv2 -> +bias -> maxpool -> fc1 (a convolution covering the whole
    map) -> +bias -> relu -> fc2 (1x1 convolution) -> +bias -> softmax

Every layer is a legacy call (cudnnConvolutionForward with the algorithm cudnnGetConvolution
ForwardAlgorithm_v7 ranks first, cudnnAddTensor, cudnnPoolingForward, cudnnActivationForward,
cudnnSoftmaxForward). Each layer's output is checked against ncudnn.reference on the layer's own
(device-computed) input, and the final classes against the reference network's. It prints the
classification, per-layer timings and PASS / FAIL. On a machine without a GPU the same code runs in
the CUDA simulator at a reduced size. A layer whose engine is not registered yet ends the demo with
the NOT_SUPPORTED message naming it (exit status 2), never a traceback.
"""
import time

import numpy as np

#: (image side, conv1 (K, R), conv2 (K, R), fc1 width) for the GPU and for the simulator
SIZES = {"gpu": (28, (20, 5), (50, 5), 500), "sim": (12, (4, 3), (6, 3), 16)}
CLASSES = 10
BATCH = 3
TOL = 3e-3  # float32 storage, TF32 allowed by the default math type


class DemoError(Exception):
    """A legacy call failed: the status name and cuDNN's last-error message."""


def _check(ret, what):
    """The out-parameters of a C-style result, or DemoError with the status and last-error message."""
    import ncudnn

    status = ret[0]
    if int(status) != 0:
        msg = ncudnn.cudnnGetLastErrorString() or ncudnn.cudnnGetErrorString(status)
        raise DemoError(f"{what}: {msg}")
    outs = ret[1:]
    return None if not outs else (outs[0] if len(outs) == 1 else outs)


def digits(side, n=BATCH):
    """Deterministic synthetic handwritten-like strokes: a vertical bar, a ring, a diagonal."""
    imgs = np.zeros((n, 1, side, side), np.float32)
    yy, xx = np.mgrid[0:side, 0:side] / (side - 1)
    shapes = [np.exp(-((xx - 0.5) / 0.08) ** 2),
              np.exp(-((np.hypot(xx - 0.5, yy - 0.5) - 0.3) / 0.07) ** 2),
              np.exp(-((xx - yy) / 0.1) ** 2)]
    for i in range(n):
        imgs[i, 0] = shapes[i % len(shapes)]
    return imgs


def weights(size, seed=2014):
    """He-initialized weights and small biases from a fixed seed: the same on every run."""
    side, (k1, r1), (k2, r2), f1 = size
    rng = np.random.default_rng(seed)
    s1 = side - r1 + 1
    p1 = s1 // 2
    s2 = p1 - r2 + 1
    p2 = s2 // 2
    shapes = {"conv1": (k1, 1, r1, r1), "conv2": (k2, k1, r2, r2), "fc1": (f1, k2, p2, p2),
              "fc2": (CLASSES, f1, 1, 1)}
    w = {}
    for name, shp in shapes.items():
        fan_in = int(np.prod(shp[1:]))
        w[name] = (rng.standard_normal(shp) * np.sqrt(2.0 / fan_in)).astype(np.float32)
        w[name + ".b"] = (0.1 * rng.standard_normal((1, shp[0], 1, 1))).astype(np.float32)
    return w


class Net:
    """The network's descriptors and device buffers, built with the legacy API."""

    def __init__(self, handle, size, batch=BATCH):
        import ncudnn.legacy as L
        from numba import cuda

        self.L, self.cuda, self.h = L, cuda, handle
        self.size, self.batch = size, batch
        self.w = weights(size)
        self.dev = {k: cuda.to_device(v) for k, v in self.w.items()}
        self.timings = []
        self.checks = []

    def tensor(self, shape):
        L = self.L
        d = _check(L.cudnnCreateTensorDescriptor(), "cudnnCreateTensorDescriptor")
        _check(L.cudnnSetTensor4dDescriptor(d, 0, 0, *shape), "cudnnSetTensor4dDescriptor")
        return d

    def _timed(self, name, fn):
        t0 = time.perf_counter()
        fn()
        self.cuda.synchronize()
        self.timings.append((name, (time.perf_counter() - t0) * 1e3))

    def conv(self, name, x, xshape):
        from . import reference as R

        L = self.L
        wshape = self.w[name].shape
        fd = _check(L.cudnnCreateFilterDescriptor(), "cudnnCreateFilterDescriptor")
        _check(L.cudnnSetFilter4dDescriptor(fd, 0, 0, *wshape), "cudnnSetFilter4dDescriptor")
        cd = _check(L.cudnnCreateConvolutionDescriptor(), "cudnnCreateConvolutionDescriptor")
        _check(L.cudnnSetConvolution2dDescriptor(cd, 0, 0, 1, 1, 1, 1, 1, 0), "cudnnSetConvolution2dDescriptor")
        yshape = tuple(_check(L.cudnnGetConvolution2dForwardOutputDim(cd, self.tensor(xshape), fd),
                              "cudnnGetConvolution2dForwardOutputDim"))
        xd, yd = self.tensor(xshape), self.tensor(yshape)
        count, perf = _check(L.cudnnGetConvolutionForwardAlgorithm_v7(self.h, xd, fd, cd, yd, 8),
                             f"{name}: cudnnGetConvolutionForwardAlgorithm_v7")
        ok = [p for p in perf[:count] if int(p.status) == 0]
        if not ok:
            _check(L.cudnnGetConvolutionForwardWorkspaceSize(self.h, xd, fd, cd, yd, 1),
                   f"{name}: cudnnGetConvolutionForwardWorkspaceSize")
            raise DemoError(f"{name}: no convolution algorithm is supported")
        algo = ok[0].algo
        ws_size = _check(L.cudnnGetConvolutionForwardWorkspaceSize(self.h, xd, fd, cd, yd, algo),
                         f"{name}: cudnnGetConvolutionForwardWorkspaceSize")
        ws = self.cuda.device_array(max(ws_size, 1), np.uint8) if ws_size else None
        y = self.cuda.device_array(yshape, np.float32)
        self._timed(f"{name} ({algo.name.replace('CUDNN_CONVOLUTION_FWD_ALGO_', '')})", lambda: _check(
            L.cudnnConvolutionForward(self.h, 1.0, xd, x, fd, self.dev[name], cd, algo, ws, ws_size, 0.0, yd, y),
            f"{name}: cudnnConvolutionForward"))
        ref = R.conv_fprop(x.copy_to_host(), self.w[name])
        self._verify(name, y, ref)
        bd = self.tensor(self.w[name + ".b"].shape)
        before = y.copy_to_host()
        self._timed(f"{name} bias", lambda: _check(L.cudnnAddTensor(self.h, 1.0, bd, self.dev[name + ".b"], 1.0, yd, y),
                                                   f"{name}: cudnnAddTensor"))
        self._verify(name + " bias", y, R.add_tensor(self.w[name + ".b"], before))
        return y, yshape

    def pool(self, name, x, xshape):
        from . import reference as R

        L = self.L
        pd = _check(L.cudnnCreatePoolingDescriptor(), "cudnnCreatePoolingDescriptor")
        _check(L.cudnnSetPooling2dDescriptor(pd, 0, 0, 2, 2, 0, 0, 2, 2), "cudnnSetPooling2dDescriptor")
        yshape = tuple(_check(L.cudnnGetPooling2dForwardOutputDim(pd, self.tensor(xshape)),
                              "cudnnGetPooling2dForwardOutputDim"))
        y = self.cuda.device_array(yshape, np.float32)
        self._timed(name, lambda: _check(L.cudnnPoolingForward(self.h, pd, 1.0, self.tensor(xshape), x, 0.0,
                                                               self.tensor(yshape), y), f"{name}: cudnnPoolingForward"))
        ref = R.resample_forward(x.copy_to_host(), "MAXPOOL", (2, 2), (2, 2), (0, 0), (0, 0))[0]
        self._verify(name, y, ref)
        return y, yshape

    def relu(self, name, x, xshape):
        from . import reference as R

        L = self.L
        ad = _check(L.cudnnCreateActivationDescriptor(), "cudnnCreateActivationDescriptor")
        _check(L.cudnnSetActivationDescriptor(ad, 1, 0, 0.0), "cudnnSetActivationDescriptor")
        before = x.copy_to_host()
        d = self.tensor(xshape)
        self._timed(name, lambda: _check(L.cudnnActivationForward(self.h, ad, 1.0, d, x, 0.0, d, x),
                                         f"{name}: cudnnActivationForward"))
        self._verify(name, x, R.activation_forward("RELU", before))
        return x, xshape

    def softmax(self, name, x, xshape):
        from . import reference as R

        L = self.L
        y = self.cuda.device_array(xshape, np.float32)
        d = self.tensor(xshape)
        self._timed(name, lambda: _check(L.cudnnSoftmaxForward(self.h, 1, 1, 1.0, d, x, 0.0, d, y),
                                         f"{name}: cudnnSoftmaxForward"))
        self._verify(name, y, R.softmax(x.copy_to_host(), axis=1))
        return y, xshape

    def _verify(self, name, y, ref):
        from .testing import rel_err

        self.checks.append((name, rel_err(y.copy_to_host(), ref)))

    def forward(self, images):
        x, shape = self.cuda.to_device(images), images.shape
        x, shape = self.conv("conv1", x, shape)
        x, shape = self.pool("pool1", x, shape)
        x, shape = self.conv("conv2", x, shape)
        x, shape = self.pool("pool2", x, shape)
        x, shape = self.conv("fc1", x, shape)
        x, shape = self.relu("relu", x, shape)
        x, shape = self.conv("fc2", x, shape)
        x, shape = self.softmax("softmax", x, shape)
        return x.copy_to_host().reshape(self.batch, CLASSES)


def reference_forward(w, images):
    """The whole network in the float64 oracle."""
    from . import reference as R

    x = images
    for conv, pool in (("conv1", True), ("conv2", True), ("fc1", False), ("fc2", False)):
        x = R.conv_fprop(x, w[conv]) + w[conv + ".b"]
        if pool:
            x = R.resample_forward(x, "MAXPOOL", (2, 2), (2, 2), (0, 0), (0, 0))[0]
        if conv == "fc1":
            x = R.activation_forward("RELU", x)
    return R.softmax(x, axis=1).reshape(len(images), CLASSES)


def run(small=None, out=print):
    """Run the demo; returns the exit status (0 PASS, 1 FAIL, 2 an engine or device is missing)."""
    import ncudnn

    sim = ncudnn.SIMULATOR if small is None else small
    size = SIZES["sim" if sim else "gpu"]
    out(f"ncudnn {ncudnn.__version__} demo: mnistCUDNN-style LeNet through the legacy cuDNN API")
    status, h = ncudnn.cudnnCreate()
    if int(status) != 0:
        out(f"cudnnCreate failed: {ncudnn.cudnnGetErrorString(status)}: {ncudnn.cudnnGetLastErrorString()}")
        return 2
    try:
        if ncudnn.SIMULATOR:
            out(f"device: CUDA simulator (no GPU): reduced size, {size[0]}x{size[0]} images")
        else:
            out(f"device: {h.device_name} (sm_{h.compute_capability[0]}{h.compute_capability[1]}), "
                f"{size[0]}x{size[0]} images")
        images = digits(size[0])
        net = Net(h, size)
        t0 = time.perf_counter()
        try:
            probs = net.forward(images)
        except DemoError as e:
            out(f"FAIL: {e}")
            missing = "no engine runs" in str(e) or "NOT_SUPPORTED" in str(e)
            if missing:
                out("A layer's engine is not registered yet; the demo runs once the engine layer has it "
                    "(`ncudnn info` lists the registered engines).")
            return 2 if missing else 1
        except Exception as e:  # a kernel or driver failure: say what, no traceback
            out(f"FAIL: unexpected {type(e).__name__}: {e}")
            return 1
        total = (time.perf_counter() - t0) * 1e3
        ref = reference_forward(net.w, images)
        out("layer timings (ms, first call includes compilation):")
        for name, ms in net.timings:
            out(f"  {name:<28s} {ms:10.3f}")
        out(f"  {'total':<28s} {total:10.3f}")
        bad = [(n, e) for n, e in net.checks if not e <= TOL]
        for n, e in net.checks:
            out(f"  check {n:<22s} rel_err {e:.2e} {'ok' if e <= TOL else 'MISMATCH'}")
        for i, (p, r) in enumerate(zip(probs, ref)):
            out(f"image {i}: class {int(np.argmax(p))} (p = {p.max():.4f}); reference class {int(np.argmax(r))}")
        end_err = float(np.abs(probs - ref).max())
        same = bool(np.all(np.argmax(probs, 1) == np.argmax(ref, 1)))
        ok = not bad and same and end_err <= 1e-3
        out(f"end-to-end: max |p - p_ref| = {end_err:.2e}; classes {'match' if same else 'DIFFER'}")
        out("PASS" if ok else "FAIL")
        return 0 if ok else 1
    finally:
        ncudnn.cudnnDestroy(h)
