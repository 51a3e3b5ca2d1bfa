"""A generated graph re-expressed through the backend API (cudnnBackend* descriptors), the way a C user
writes it: tensor, operation and operation-graph descriptors, engine heuristics under modes A, B and
FALLBACK, one execution plan per engine config, a variant pack and cudnnBackendExecute.

Graphs of one matmul, convolution (fprop / dgrad / wgrad) or pointwise node are translated; the
pygraph's validated IR gives every tensor's dims, strides and type. Operations pygraph has no method
for (BN finalize, BN backward weights; GENSTATS too) come as a :class:`BackendOp`: the operation's
descriptor type, its tensors by attribute name and its other attributes, set as given. The runner
drives this object as it drives a pygraph (``backend_plans``, ``get_workspace_size_plan_at_index``,
``select_plan`` / ``execute``, ``ir``: the graph the backend lowered, its tensors named as the source
named them)."""
from ..backend import (cudnnBackendCreateDescriptor, cudnnBackendExecute, cudnnBackendFinalize,
                       cudnnBackendGetAttribute, cudnnBackendSetAttribute)
from ..errors import error_for, peek_last_error
from ..types import (cudnnBackendAttributeName_t as A, cudnnBackendAttributeType_t as T,
                     cudnnBackendDescriptorType_t as D, cudnnBackendHeurMode_t as HM, cudnnStatus_t as S)

DESC = T.CUDNN_TYPE_BACKEND_DESCRIPTOR
OPS = ("matmul", "conv_fprop", "conv_dgrad", "conv_wgrad", "pointwise")
_CONV = {"conv_fprop": (D.CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR, "FORWARD",
                        {"X": "X", "W": "W", "Y": "Y"}),
         "conv_dgrad": (D.CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR, "BWD_DATA",
                        {"DX": "DX", "W": "W", "DY": "DY"}),
         "conv_wgrad": (D.CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR, "BWD_FILTER",
                        {"X": "X", "DW": "DW", "DY": "DY"})}
_HANDLE = []


def _ok(result, what):
    if int(result[0]) != 0:
        raise error_for(S(int(result[0])), f"backend {what}: {peek_last_error()}")
    return result[1:]


def _make(dtype, attrs, what):
    d = _ok(cudnnBackendCreateDescriptor(dtype), what)[0]
    for name, (atype, values) in attrs.items():
        n = len(values) if isinstance(values, (list, tuple)) else 1
        _ok(cudnnBackendSetAttribute(d, name, atype, n, values), f"{what} {name.name}")
    _ok(cudnnBackendFinalize(d), f"{what} finalize")
    return d


def _handle():
    if not _HANDLE:
        from ..handle import cudnnCreate

        _HANDLE.append(_ok(cudnnCreate(), "cudnnCreate")[0])
    return _HANDLE[0]


class BackendOp:
    """One backend operation described directly: descriptor type ``kind`` (cudnnBackendDescriptorType_t),
    ``tensors`` {attribute name suffix: TensorDesc} (by-value ones are by-value tensor descriptors; the
    variant pack gives their values) and ``attrs`` {attribute name suffix: (cudnnBackendAttributeType_t,
    value)}, the suffixes after ``prefix`` (e.g. ``CUDNN_ATTR_OPERATION_BN_FINALIZE_``). It stands where
    a pygraph stands until the runner translates it (``validate`` checks the tensors)."""

    _views = {}

    def __init__(self, kind, prefix, tensors, attrs, name="fuzz"):
        self.kind, self.prefix, self.tensors, self.attrs, self.name = kind, prefix, tensors, attrs, name

    def validate(self):
        for t in self.tensors.values():
            t.validate()


def translatable(g):
    """Whether graph ``g`` (a pygraph or a :class:`BackendOp`) can run through the backend API here."""
    return isinstance(g, BackendOp) or (len(g.ir.nodes) == 1 and g.ir.nodes[0].OP in OPS)


class BackendGraph:
    """The backend-API twin of a validated single-node pygraph ``g``."""

    _views = {}

    def __init__(self, g):
        self.src = g
        self._tensors = {}
        if isinstance(g, BackendOp):
            attrs = {A[g.prefix + k]: (DESC, self._tensor(t)) for k, t in g.tensors.items()}
            attrs.update({A[g.prefix + k]: v for k, v in g.attrs.items()})
            self._finish(_make(g.kind, attrs, f"{g.kind.name}"), {t.uid: t.name for t in g.tensors.values()})
            return
        node = g.ir.nodes[0]
        ports = {}
        for table in (node.inputs, node.outputs):
            for port, t in table.items():
                ports[port] = self._tensor(t)
        comp = getattr(node, "compute_dtype", None) or node.inputs[next(iter(node.inputs))].dtype
        if node.OP == "matmul":
            mm = _make(D.CUDNN_BACKEND_MATMUL_DESCRIPTOR, {A.CUDNN_ATTR_MATMUL_COMP_TYPE: (T.CUDNN_TYPE_DATA_TYPE, comp)},
                       "matmul")
            op = _make(D.CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, {
                A.CUDNN_ATTR_OPERATION_MATMUL_ADESC: (DESC, ports["A"]),
                A.CUDNN_ATTR_OPERATION_MATMUL_BDESC: (DESC, ports["B"]),
                A.CUDNN_ATTR_OPERATION_MATMUL_CDESC: (DESC, ports["C"]), A.CUDNN_ATTR_OPERATION_MATMUL_DESC: (DESC, mm)},
                "matmul operation")
        elif node.OP == "pointwise":
            pw = _make(D.CUDNN_BACKEND_POINTWISE_DESCRIPTOR, {
                A.CUDNN_ATTR_POINTWISE_MODE: (T.CUDNN_TYPE_POINTWISE_MODE, node.mode),
                A.CUDNN_ATTR_POINTWISE_MATH_PREC: (T.CUDNN_TYPE_DATA_TYPE, comp)}, "pointwise")
            attrs = {A.CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR: (DESC, pw)}
            for port, d in ports.items():
                attrs[A[f"CUDNN_ATTR_OPERATION_POINTWISE_{port}DESC"]] = (DESC, d)
            op = _make(D.CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, attrs, "pointwise operation")
        else:
            kind, prefix, names = _CONV[node.OP]
            n = int(node.spatial_dims)
            conv = _make(D.CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, {
                A.CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS: (T.CUDNN_TYPE_INT64, n),
                A.CUDNN_ATTR_CONVOLUTION_COMP_TYPE: (T.CUDNN_TYPE_DATA_TYPE, comp),
                A.CUDNN_ATTR_CONVOLUTION_CONV_MODE: (T.CUDNN_TYPE_CONVOLUTION_MODE, node.mode),
                A.CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS: (T.CUDNN_TYPE_INT64, list(node.pre_padding)),
                A.CUDNN_ATTR_CONVOLUTION_POST_PADDINGS: (T.CUDNN_TYPE_INT64, list(node.post_padding)),
                A.CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES: (T.CUDNN_TYPE_INT64, list(node.stride)),
                A.CUDNN_ATTR_CONVOLUTION_DILATIONS: (T.CUDNN_TYPE_INT64, list(node.dilation))}, "convolution")
            p = f"CUDNN_ATTR_OPERATION_CONVOLUTION_{prefix}_"
            attrs = {A[p + names[k]]: (DESC, ports[k]) for k in names}
            attrs.update({A[p + "CONV_DESC"]: (DESC, conv), A[p + "ALPHA"]: (T.CUDNN_TYPE_FLOAT, 1.0),
                          A[p + "BETA"]: (T.CUDNN_TYPE_FLOAT, 0.0)})
            op = _make(kind, attrs, f"{node.OP} operation")
        self._finish(op, {})

    def _finish(self, op, names):
        """The operation graph of ``op``; the lowered IR's tensors named by ``names`` {uid: name} (the
        runner draws inputs and reports by name)."""
        self.graph = _make(D.CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, {
            A.CUDNN_ATTR_OPERATIONGRAPH_OPS: (DESC, [op]),
            A.CUDNN_ATTR_OPERATIONGRAPH_HANDLE: (T.CUDNN_TYPE_HANDLE, _handle())}, "operation graph")
        self.ir = self.graph.state["graph"]
        for uid, t in self.ir.tensors().items():
            if uid in names:
                t.name = names[uid]
        self.plans = []

    def _tensor(self, t):
        d = self._tensors.get(t.uid)
        if d is None:
            attrs = {A.CUDNN_ATTR_TENSOR_UNIQUE_ID: (T.CUDNN_TYPE_INT64, t.uid),
                     A.CUDNN_ATTR_TENSOR_DATA_TYPE: (T.CUDNN_TYPE_DATA_TYPE, t.dtype),
                     A.CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT: (T.CUDNN_TYPE_INT64, 16),
                     A.CUDNN_ATTR_TENSOR_DIMENSIONS: (T.CUDNN_TYPE_INT64, list(t.dims)),
                     A.CUDNN_ATTR_TENSOR_STRIDES: (T.CUDNN_TYPE_INT64, list(t.strides))}
            if t.is_by_value:
                attrs[A.CUDNN_ATTR_TENSOR_IS_BY_VALUE] = (T.CUDNN_TYPE_BOOLEAN, True)
            d = self._tensors[t.uid] = _make(D.CUDNN_BACKEND_TENSOR_DESCRIPTOR, attrs, f"tensor {t.name}")
        return d

    def backend_plans(self, modes):
        """{index: (name, engine, notes, first-of-modes)} of a plan per distinct engine config of the
        heuristics under ``modes`` [(label, cudnnBackendHeurMode_t)], and the configs that did not build."""
        seen, errors = {}, {}
        for label, mode in modes:
            h = _make(D.CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, {
                A.CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH: (DESC, self.graph),
                A.CUDNN_ATTR_ENGINEHEUR_MODE: (T.CUDNN_TYPE_HEUR_MODE, HM(mode))}, f"heuristics {label}")
            count = _ok(cudnnBackendGetAttribute(h, A.CUDNN_ATTR_ENGINEHEUR_RESULTS, DESC, 0), "results")[0]
            cfgs = _ok(cudnnBackendGetAttribute(h, A.CUDNN_ATTR_ENGINEHEUR_RESULTS, DESC, count), "results")[1] \
                if count else []
            for k, cfg in enumerate(cfgs):
                try:
                    plan = _make(D.CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, {
                        A.CUDNN_ATTR_EXECUTION_PLAN_HANDLE: (T.CUDNN_TYPE_HANDLE, _handle()),
                        A.CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG: (DESC, cfg)}, "execution plan")
                except Exception as e:  # noqa: BLE001 - a config the heuristics gave must build
                    errors[f"{label}[{k}]"] = f"{type(e).__name__}: {e}"
                    continue
                ec = plan.state["ec"]
                name = str(ec)
                if name not in seen:
                    seen[name] = (plan, ec, [])
                if k == 0:
                    seen[name][2].append(label)
        self.plans = [v[0] for v in seen.values()]
        out = {i: (name, v[1].engine.name, tuple(v[1].numerical_notes), v[2]) for i, (name, v) in enumerate(seen.items())}
        if not out and not errors:
            raise error_for(S.CUDNN_STATUS_NOT_SUPPORTED, "backend heuristics: no engine config for any mode")
        return out, errors

    def get_workspace_size_plan_at_index(self, i):
        return int(_ok(cudnnBackendGetAttribute(self.plans[i], A.CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                                T.CUDNN_TYPE_INT64, 1), "workspace size")[1][0])

    def select_plan(self, index):
        self.selected = index

    def execute(self, pack, ws):
        self.execute_plan_at_index(pack, ws, self.selected)

    def execute_plan_at_index(self, pack, ws, index):
        uids = list(pack)
        vp = _make(D.CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, {
            A.CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS: (T.CUDNN_TYPE_INT64, uids),
            A.CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS: (T.CUDNN_TYPE_VOID_PTR, [pack[u] for u in uids]),
            A.CUDNN_ATTR_VARIANT_PACK_WORKSPACE: (T.CUDNN_TYPE_VOID_PTR, ws)}, "variant pack")
        _ok(cudnnBackendExecute(_handle(), self.plans[index], vp), "execute")
