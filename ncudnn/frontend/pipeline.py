"""The build pipeline and execution of pygraph, through :mod:`ncudnn.engines.api`.

    validate -> build_operation_graph -> create_execution_plans([modes]) -> check_support -> build_plans(policy)

Plans are indexed in heuristic order (modes concatenated, duplicates dropped). Filters
(``deselect_engines``, ``deselect_workspace_greater_than``, note filters) bar indices; ``check_support``
records each plan's (status, reason) and raises cudnnGraphNotSupportedError, naming the nodes and
reasons, when none is left; ``build_plans`` builds the first supported plan (HEURISTICS_CHOICE) or all
(ALL) and selects the first built one; ``execute`` runs the selected plan.
"""
import dataclasses
import numbers
import os

from ..engines import api
from ..errors import CudnnError
from ..handle import get_handle_or_raise
from ..types import cudnnBackendHeurMode_t as HM, cudnnBackendNumericalNote_t, cudnnStatus_t
from . import log_steps
from .enums import build_plan_policy, enum_value, heur_mode
from .overrides import specialized
from .plan_queries import PlanQueryMixin
from .errors import graph_error, reraise
from .tensor import tensor
from .ops_view import view_value
from .values import host_scalar

S = cudnnStatus_t
_TF32_NOTES = {int(cudnnBackendNumericalNote_t.CUDNN_NUMERICAL_NOTE_TENSOR_CORE),
               int(cudnnBackendNumericalNote_t.CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS)}

class PipelineMixin(PlanQueryMixin):
    # ------------------------------------------------------------------ state
    def _init_pipeline(self):
        self._plans_state = True
        self._filters = {"engines": set(), "workspace": None, "notes": []}
        self._reset_plans()

    def _reset_plans(self):
        self._candidates = []      # EngineConfigs, in heuristic order
        self._support = {}         # index -> (status, reason)
        self._built = {}           # index -> ExecutionPlan
        self._build_errors = {}    # index -> reason
        self._selected = None
        self._planned = False
        self._op_graph_built = False

    def _ctx(self, handle=None):
        """The engines' BuildContext: the handle's device, with the graph's ``device_property`` (a device
        properties object from create_device_properties) or ``sm_count`` in place of the device's."""
        ctx = api.context(handle if handle is not None else self.handle)
        dev = self.device_property if hasattr(self.device_property, "sm_count") else ctx.device
        if self.sm_count and dev is not None and int(self.sm_count) != dev.sm_count:
            dev = dataclasses.replace(dev, sm_count=int(self.sm_count))
        if dev is not ctx.device:
            ctx = dataclasses.replace(ctx, device=dev)
        if not ctx.allow_tf32 and self._asks_tf32():
            ctx = dataclasses.replace(ctx, allow_tf32=True)
        return ctx

    def _asks_tf32(self):
        """TF32 is opt-in: FP32 operands reach tensor cores only when the graph selects the TENSOR_CORE or
        DOWN_CONVERT_INPUTS numerical note (``select_numeric_notes``; plans without it are barred anyway),
        and never under ``NVIDIA_TF32_OVERRIDE=0`` (cuDNN's switch)."""
        if os.environ.get("NVIDIA_TF32_OVERRIDE") == "0":
            return False
        return any(kind == "numeric" and keep and notes & _TF32_NOTES
                   for kind, notes, keep in self._filters["notes"])

    def _require(self, what, ok):
        if not ok:
            raise graph_error(S.CUDNN_STATUS_BAD_PARAM, f"graph '{self.name}': {what}")

    def _call(self, fn, *args, context=""):
        try:
            return fn(*args)
        except CudnnError as e:
            raise reraise(e, context or f"graph '{self.name}'") from None

    # ------------------------------------------------------------------ the five steps
    def build_operation_graph(self):
        """Partition the validated graph into engine-executable subgraphs (an unpartitionable graph
        raises cudnnGraphNotSupportedError)."""
        if not self._validated:
            self.validate()
        if self.kernel_cache is not None:
            self.kernel_cache._attach()
        sub = self._call(api.problem, self._ir, context=f"graph '{self.name}' build_operation_graph")
        log_steps.step(self, 2, "BUILD_OPERATION_GRAPH", sub.describe())
        self._op_graph_built = True

    def create_execution_plans(self, heur_modes=None):
        """Ask the heuristics for engine configs under each mode (default [A]), best first.

        ``heur_mode.OPENSOURCE`` is cudnn-frontend's mode for its open-source engines; every ncudnn engine
        is open source, so it ranks exactly as A (listing both gives A's configs once). With a
        ``kernel_cache``, the config it recorded for a graph of this structure (any shapes) comes first
        when the heuristics offer its engine and it supports this graph (see :mod:`.kernel_cache`)."""
        if not self._op_graph_built:
            self.build_operation_graph()
        modes = heur_modes if heur_modes is not None else [heur_mode.A]
        if not isinstance(modes, (list, tuple)):
            modes = [modes]
        members = [self._heur_mode(m) for m in modes]
        ctx = self._ctx()
        seen, out = set(), []
        for m in members:
            mode = HM.CUDNN_HEUR_MODE_A if m == heur_mode.OPENSOURCE else HM(int(m))
            for ec in self._call(api.get_heuristics, self._ir, mode, ctx):
                if ec.ident() not in seen:
                    seen.add(ec.ident())
                    out.append(ec)
        cached = self._from_kernel_cache(out, ctx)
        if cached is not None:
            out = [cached] + [ec for ec in out if ec.ident() != cached.ident()]
        self._reset_plans()
        self._op_graph_built = True
        self._plan_modes, self._plans_tf32 = list(modes), ctx.allow_tf32
        self._candidates = out
        self._planned = True
        names = [m.name for m in members]
        log_steps.step(self, 3, "CREATE_EXECUTION_PLANS",
                       f"{len(out)} engine config(s) from {names}"
                       + (f" (kernel cache: {cached} first)" if cached is not None else "") + ": "
                       + ", ".join(str(ec) for ec in out))
        if not out:
            status, why = self._why_unsupported()
            raise graph_error(status, f"graph '{self.name}' ({self._ops_named()}): 0 engine configs from the "
                              f"heuristics {names}. {why}")

    def _heur_mode(self, m):
        """The frontend heur_mode member of ``m`` (a member, int, name, or a backend cudnnBackendHeurMode_t:
        INSTANT is A, as cuDNN documents; CUDNN_HEUR_MODES_COUNT is no mode)."""
        if isinstance(m, HM):
            if m == HM.CUDNN_HEUR_MODES_COUNT:
                raise graph_error(S.CUDNN_STATUS_BAD_PARAM, f"graph '{self.name}': CUDNN_HEUR_MODES_COUNT is not a "
                                  "heuristic mode")
            return heur_mode.A if m == HM.CUDNN_HEUR_MODE_INSTANT else heur_mode(int(m))
        return self._call(enum_value, m, heur_mode, "heur_mode")

    def _ops_named(self, limit=6):
        """The graph's nodes as messages name them: ``relu.0 (pointwise), ...``."""
        nodes = self._ir.nodes if self._ir is not None else []
        names = [f"{n.name} ({n.OP})" for n in nodes[:limit]]
        more = len(nodes) - limit
        return "ops " + ", ".join(names) + (f" and {more} more" if more > 0 else "")

    def check_support(self, handle=None):
        """Check every plan not barred by a filter; raise cudnnGraphNotSupportedError when none is left."""
        self._require("call create_execution_plans first", self._planned)
        ctx = self._ctx(handle)
        barred = self._barred()
        for i, ec in enumerate(self._candidates):
            self._support[i] = barred[i] if i in barred else tuple(api.check_support(self._ir, ec, ctx))
        ok = [i for i, (st, _) in self._support.items() if int(st) == 0]
        log_steps.step(self, 4, "CHECK_SUPPORT", f"{len(ok)} of {len(self._candidates)} plan(s) supported")
        if not ok:
            statuses = {int(st) for st, _ in self._support.values()}
            status = S(statuses.pop()) if len(statuses) == 1 else S.CUDNN_STATUS_NOT_SUPPORTED
            # the engines the plans do not come from say why too (a TF32 user whose matmul no tensor-core
            # engine takes learns why from them, not from the FP32 plans the note filter bars)
            others = self._why_unsupported()[1]
            raise graph_error(status, f"graph '{self.name}' ({self._ops_named()}): no execution plan of "
                              f"{len(self._candidates)} supports the graph. {self._reasons()}"
                              + (f". {others}" if others else ""))

    def build_plans(self, policy=build_plan_policy.HEURISTICS_CHOICE, handle=None):
        """Build the first supported plan (HEURISTICS_CHOICE) or every supported plan (ALL)."""
        self._require("call create_execution_plans first", self._planned)
        if not self._support:
            self.check_support(handle)
        policy = enum_value(policy, build_plan_policy, "build_plan_policy")
        for i in range(len(self._candidates)):
            if i in self._built or int(self._support.get(i, (1, ""))[0]) != 0:
                continue
            self._build_index(i, handle, raise_=False)
            if self._built and policy == build_plan_policy.HEURISTICS_CHOICE:
                break
        log_steps.step(self, 5, "BUILD_PLANS", f"{policy.name}: built {sorted(self._built)}"
                       + (f", failed {self._build_errors}" if self._build_errors else ""))
        if not self._built:
            raise graph_error(S.CUDNN_STATUS_NOT_SUPPORTED, f"graph '{self.name}' ({self._ops_named()}): no plan "
                              "could be built. "
                              + "; ".join(f"plan {i} ({self._candidates[i]}): {r}"
                                          for i, r in self._build_errors.items()))
        if self._selected not in self._built:
            self._selected = min(self._built)

    def build(self, heur_modes=None, handle=None):
        """validate, build_operation_graph, create_execution_plans(heur_modes), check_support, build_plans."""
        self.validate()
        self.build_operation_graph()
        self.create_execution_plans(heur_modes)
        self.check_support(handle)
        self.build_plans(build_plan_policy.HEURISTICS_CHOICE, handle)

    def _build_index(self, i, handle=None, raise_=True):
        try:
            plan = api.build_plan(self._ir, self._candidates[i], self._ctx(handle))
        except CudnnError as e:
            self._build_errors[i] = f"{e.status.name}: {e.message}"
            if raise_:
                raise reraise(e, f"graph '{self.name}' plan {i} ({self._candidates[i]})") from None
            return None
        self._built[i] = plan
        self._build_errors.pop(i, None)
        if self.kernel_cache is not None:
            self.kernel_cache._record(self._ir, self._candidates[i])
        return plan

    def _from_kernel_cache(self, offered, ctx):
        """The config the kernel cache recorded for this graph's structure, ready for this graph, when its
        engine is among those ``offered`` and it supports the graph; else None."""
        kc = self.kernel_cache
        if kc is None:
            return None
        engines = {ec.engine.name for ec in offered}
        for d in kc._configs(self._ir):
            if d.get("engine") not in engines:
                continue
            try:
                ec = api.engine_config_from_json(d, self._ir, ctx)
                if int(api.check_support(self._ir, ec, ctx)[0]) == 0:
                    return ec
            except CudnnError:   # a record this ncudnn cannot rebuild for these shapes: the heuristics decide
                continue
        return None

    # ------------------------------------------------------------------ why not
    def _why_unsupported(self):
        """(status, text): each registered engine's reason for refusing the graph, summarized as the
        engine layer does (:func:`ncudnn.engines.api.explain_unsupported`: engines that accept the pattern
        first, their status when they agree)."""
        why = api.explain_unsupported(self._ir, self._ctx())
        return why.status, why.by_engine

    def _reasons(self):
        rows = [f"plan {i} ({self._candidates[i]}): {S(int(st)).name}: {why}" for i, (st, why) in self._support.items()]
        return "; ".join(rows)

    def get_workspace_size(self, handle=None, override_uids=None, override_shapes=None, override_strides=None):
        """Workspace bytes of the selected plan (for the overridden shapes when given)."""
        self._require("no plan is built: call build_plans first", self._selected is not None)
        plan = self._plan(self._selected, handle, override_uids, override_shapes, override_strides)
        return int(plan.workspace_size)

    def _plan(self, i, handle=None, override_uids=None, override_shapes=None, override_strides=None):
        if override_uids:
            _, plan = specialized(self, i, override_uids, override_shapes, override_strides, handle)
            if plan is not None:
                return plan
        return self._built[i]

    # ------------------------------------------------------------------ execution
    def _pack(self, variant_pack):
        """{uid: value} from a pack keyed by tensors, uids or names; by-value entries as NumPy scalars of
        the tensor's type; arrays bound at construction fill what the pack leaves out.

        A ``None`` key is skipped, whatever its value, as cudnn-frontend's ``execute`` skips it (an optional
        tensor that was never made: ``{bias: b_gpu}`` with ``bias = None``). A ``None`` value is skipped
        for a tensor the graph does not read or write (an optional input left out); for a tensor it
        does, it is BAD_PARAM_NULL_POINTER naming the tensor."""
        out = {}
        used = written = None
        for k, v in variant_pack.items():
            if k is None:
                continue
            if type(k) is tensor:
                if k._graph is None or k._graph() is not self:
                    raise graph_error(S.CUDNN_STATUS_BAD_PARAM, f"variant pack key '{k.get_name()}' is not a "
                                      f"tensor of graph '{self.name}'")
                d = k._desc
            elif isinstance(k, str):
                t = self.find_tensor(k)
                if t is None:
                    raise graph_error(S.CUDNN_STATUS_BAD_PARAM, f"variant pack: no tensor named {k!r}")
                d = t._desc
            elif isinstance(k, numbers.Integral):
                d = self.query_tensor_attributes_of_uid(int(k))._desc
            else:
                raise graph_error(S.CUDNN_STATUS_BAD_PARAM, f"variant pack key {k!r} is not a tensor, uid or name")
            if v is None:
                used, written = self._pack_uids() if used is None else (used, written)
                if d.uid in used:
                    raise graph_error(S.CUDNN_STATUS_BAD_PARAM_NULL_POINTER,
                                      f"graph '{self.name}' variant pack: {d.label} is None, but the graph "
                                      f"{'writes' if d.uid in written else 'reads'} it")
                continue
            if d.is_by_value:
                v = host_scalar(v, d.dtype)
            out[d.uid] = v
        if self._bindings:
            for uid, arr in self._bindings.items():
                out.setdefault(uid, arr)
        if self._views:
            for view, (src, offset) in self._views.items():
                s_uid, v_uid = src._desc.uid, view._desc.uid
                if s_uid in out and v_uid not in out:
                    out[v_uid] = view_value(out[s_uid], src._desc, view._desc, offset)
        return out

    def _pack_uids(self):
        """(uids whose buffers a plan of the validated graph reads or writes, the written ones): its
        non-virtual tensors, their ragged offsets, and the graph inputs behind hidden views."""
        ir = self.ir
        ts = [t for t in ir.tensors().values() if not t.is_virtual]
        ts += [t.ragged_offset for t in ts if t.ragged_offset is not None]
        used = {t.uid for t in ts}
        for view, (src, _) in self._views.items():
            if view._desc.uid in used:
                used.add(src._desc.uid)
        written = {t.uid for n in ir.nodes for t in n.outputs.values() if not t.is_virtual}
        return used, written

    def execute(self, variant_pack, workspace=None, handle=None, override_uids=None, override_shapes=None,
                override_strides=None):
        """Run the selected plan. ``variant_pack``: {tensor | uid | name: device array or pointer; by-value
        scalars as numbers or host tensors}; ``workspace``: a device buffer of ``get_workspace_size()``."""
        self._require("no plan is built: call build / build_plans first", self._selected is not None)
        self._run(self._selected, variant_pack, workspace, handle, override_uids, override_shapes, override_strides)

    def execute_plan_at_index(self, variant_pack, workspace=None, index=0, handle=None, **overrides):
        i = self._index(index)
        self._refuse_barred(i)
        if i not in self._built:
            self._build_index(i, handle)
        self._run(i, variant_pack, workspace, handle, **{k: overrides.get(k) for k in
                                                          ("override_uids", "override_shapes", "override_strides")})

    def _run(self, i, variant_pack, workspace, handle, override_uids=None, override_shapes=None,
             override_strides=None):
        h = handle if handle is not None else self.handle
        if h is not None:
            self._call(get_handle_or_raise, h, context=f"graph '{self.name}' execute")
        plan = self._plan(i, h, override_uids, override_shapes, override_strides)
        pack = self._pack(variant_pack)
        where = f"graph '{self.name}' execute (plan {i}: {self._candidates[i]})"
        try:
            api.execute(plan, pack, workspace, handle=h)
        except CudnnError as e:
            raise reraise(e, where) from None
        except Exception as e:   # a kernel or launch failure is the call's EXECUTION_FAILED, never a bare error
            raise graph_error(S.CUDNN_STATUS_EXECUTION_FAILED, f"{where}: {type(e).__name__}: {e}") from None

    def autotune(self, variant_pack, workspace=None, handle=None, runs=None, warmup=None, store=True, indices=None):
        """Time every supported plan (or those in ``indices``) on these buffers with the engine layer's
        autotuner (results kept in its persistent tuning cache unless ``store=False``, so heuristic mode B
        ranks the winner first next time), select the fastest and return [(plan index, plan name,
        median ms)], fastest first."""
        self._require("call create_execution_plans and check_support first", self._planned)
        if not self._support:
            self.check_support(handle)
        idx = [i for i, (st, _) in self._support.items() if int(st) == 0 and (indices is None or i in indices)]
        kw = {k: v for k, v in (("runs", runs), ("warmup", warmup)) if v is not None}
        res = self._call(lambda: api.autotune(self._ir, [self._candidates[i] for i in idx], self._pack(variant_pack),
                                                 workspace, self._ctx(handle), store=store, **kw))
        by_ident = {self._candidates[i].ident(): i for i in idx}
        out = []
        for r in res:
            ec, ms = r[0], r[1]
            i = by_ident.get(ec.ident())
            if i is not None:
                out.append((i, str(ec), float(ms)))
        if out:
            self.select_plan(out[0][0])
        return out

    def populate_cuda_graph(self, handle, variant_pack, workspace, cuda_graph):
        """Add the selected plan's kernels, bound to these buffers, to ``cuda_graph`` (a CUgraph) as kernel
        nodes (the engine layer's native path; stream capture for plans that cannot give launches)."""
        from .cudagraph import record

        record(self, handle, variant_pack, workspace, cuda_graph)

    def update_cuda_graph(self, handle, variant_pack, workspace, cuda_graph):
        """Rebind the nodes populate_cuda_graph added to new buffers (then instantiate again, or
        cudaGraphExecUpdate an instantiated copy)."""
        from .cudagraph import record

        record(self, handle, variant_pack, workspace, cuda_graph, update=True)
