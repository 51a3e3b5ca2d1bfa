"""Plan filters and queries of pygraph: deselect / select by engine name, workspace and notes (they bar
plan indices at check_support), plan names, engines and knobs, notes, appending a hand-picked engine
config, building / selecting one plan, the graph key."""
import numbers

from ..engines import api
from ..types import cudnnStatus_t
from .enums import behavior_note, enum_value, knob_type, numerical_note
from .errors import graph_error

S = cudnnStatus_t


class PlanQueryMixin:
    # ------------------------------------------------------------------ filters
    def _barred(self):
        """{index: (status, reason)} of every candidate a filter bars."""
        out = {}
        for i in range(len(self._candidates)):
            why = self._bar_reason(i)
            if why is not None:
                out[i] = why
        return out

    def _bar_reason(self, i):
        """(status, reason) when a filter bars candidate ``i``, else None (the plan name is formatted
        only when an engine filter is set: execute_plan_at_index asks on every call)."""
        f, ec = self._filters, self._candidates[i]
        if f["engines"]:
            name = self.get_plan_name_at_index(i)
            if any(p in name for p in f["engines"]):
                return S.CUDNN_STATUS_NOT_SUPPORTED, "engine deselected by deselect_engines"
        if f["workspace"] is not None and ec.workspace_size > f["workspace"]:
            return (S.CUDNN_STATUS_NOT_SUPPORTED,
                    f"workspace {ec.workspace_size} B > deselect_workspace_greater_than({f['workspace']})")
        for kind, notes, keep in f["notes"]:
            have = {int(n) for n in (ec.numerical_notes if kind == "numeric" else ec.behavior_notes)}
            if (not keep and have & notes) or (keep and not notes <= have):
                return (S.CUDNN_STATUS_NOT_SUPPORTED, f"{kind} note filter "
                        f"({'select' if keep else 'deselect'} {sorted(notes)}); plan has {sorted(have)}")
        return None

    def _apply_filters(self):
        """A filter changed: support is asked again, and built plans it now bars are dropped (a selected
        one too: the first built plan left is selected, or none)."""
        self._support.clear()
        if not self._candidates:
            return
        barred = self._barred()
        for i in barred:
            self._built.pop(i, None)
        if self._selected in barred or self._selected not in self._built:
            self._selected = min(self._built) if self._built else None

    def _refuse_barred(self, i):
        """Raise NOT_SUPPORTED when a filter bars plan ``i`` (it is never built, selected or run)."""
        why = self._bar_reason(i)
        if why is not None:
            raise graph_error(why[0], f"graph '{self.name}': plan {i} ({self._candidates[i]}) is barred: {why[1]}")

    def _add_note_filter(self, kind, notes, keep, enum_cls):
        if isinstance(notes, (str, bytes)) or not hasattr(notes, "__iter__"):
            notes = [notes]
        self._filters["notes"].append((kind, {int(enum_value(n, enum_cls, kind)) for n in notes}, keep))
        self._apply_filters()
        if self._planned and not getattr(self, "_plans_tf32", True) and self._ctx().allow_tf32:
            self.create_execution_plans(self._plan_modes)   # the TF32 opt-in admits tensor-core plans: ask again
        return self

    def deselect_numeric_notes(self, notes):
        return self._add_note_filter("numeric", notes, False, numerical_note)

    def select_numeric_notes(self, notes):
        return self._add_note_filter("numeric", notes, True, numerical_note)

    def deselect_behavior_notes(self, notes):
        return self._add_note_filter("behavior", notes, False, behavior_note)

    def select_behavior_notes(self, notes):
        return self._add_note_filter("behavior", notes, True, behavior_note)

    def deselect_engines(self, engine_names):
        """Bar every plan whose name (``get_plan_name_at_index``) contains one of ``engine_names`` (a list
        of names, or one name), as cudnn-frontend does: a full plan name bars that plan."""
        names = [engine_names] if isinstance(engine_names, str) else engine_names
        try:
            names = list(names)
        except TypeError:
            names = None
        if names is None or not all(isinstance(n, str) for n in names):
            raise graph_error(S.CUDNN_STATUS_BAD_PARAM, f"graph '{self.name}': deselect_engines takes a list of "
                              f"engine / plan names (str), not {engine_names!r}")
        self._filters["engines"].update(names)
        self._apply_filters()
        return self

    def deselect_workspace_greater_than(self, workspace_limit):
        if isinstance(workspace_limit, bool) or not isinstance(workspace_limit, numbers.Integral):
            raise graph_error(S.CUDNN_STATUS_BAD_PARAM, f"graph '{self.name}': deselect_workspace_greater_than "
                              f"takes a byte count (int), not {workspace_limit!r}")
        self._filters["workspace"] = int(workspace_limit)
        self._apply_filters()
        return self

    # ------------------------------------------------------------------ plan queries
    def _index(self, i):
        self._require("no execution plans: call create_execution_plans first", self._planned)
        if not 0 <= int(i) < len(self._candidates):
            raise graph_error(S.CUDNN_STATUS_BAD_PARAM, f"plan index {i} out of range "
                              f"(0..{len(self._candidates) - 1})")
        return int(i)

    def get_execution_plan_count(self):
        return len(self._candidates)

    def get_plan_name_at_index(self, index):
        return str(self._candidates[self._index(index)])

    def get_engine_count(self):
        """Number of engine indices of a graph (0..count-1, as the backend's ENGINE_GLOBAL_COUNT)."""
        return api.engine_count()

    def _engines(self):
        """This graph's engines by index. As in the backend (and cuDNN), an engine's index is meaningful
        per operation graph: the engines that run the graph first (global order), then the rest."""
        if not self._op_graph_built:
            self.build_operation_graph()
        return api.graph_engines(self._ir, self._ctx())

    def _engine(self, engine_id):
        order = self._engines()
        i = int(engine_id)
        if not 0 <= i < len(order):
            raise graph_error(S.CUDNN_STATUS_BAD_PARAM, f"graph '{self.name}': no engine with index {engine_id} "
                              f"(0..{len(order) - 1})")
        return order[i]

    def get_engine_and_knobs_at_index(self, index):
        """(engine index in this graph, {knob_type: value}) of plan ``index``."""
        ec = self._candidates[self._index(index)]
        return self._engines().index(ec.engine), {_knob(k): v for k, v in ec.config.knobs}

    def get_knobs_for_engine(self, engine_id):
        """The knobs engine ``engine_id`` (an index of this graph) offers, as :class:`knob` objects."""
        eng = self._engine(engine_id)
        sub = api.problem(self.ir)
        return [knob(_knob(int(k.type)), k.min, k.max, k.stride, k.default) for k in eng.knobs(sub)]

    def create_execution_plan(self, engine_id, knobs=None):
        """Append the plan of engine ``engine_id`` (an index of this graph) with ``knobs``
        ({knob_type: value}); returns self."""
        eng = self._engine(engine_id)
        cfg = eng.default_config(api.problem(self._ir))
        for k, v in (knobs or {}).items():
            cfg = cfg.with_knob(int(enum_value(k, knob_type, "knob_type")), int(v))
        ec = self._call(api.engine_config_from_json, {"engine": eng.name, "config": cfg.to_json()}, self._ir,
                        self._ctx())
        self._planned = True
        self._candidates.append(ec)
        return self

    def get_workspace_size_plan_at_index(self, index, *args, **kwargs):
        i = self._index(index)
        plan = self._built.get(i)
        return int(plan.workspace_size if plan is not None else self._candidates[i].workspace_size)

    def build_plan_at_index(self, index, handle=None):
        i = self._index(index)
        self._refuse_barred(i)
        if i not in self._built:
            self._build_index(i, handle)
        if self._selected is None:
            self._selected = i
        return self

    def select_plan(self, index):
        i = self._index(index)
        self._refuse_barred(i)
        if i not in self._built:
            self._build_index(i)
        self._selected = i
        return self

    def get_selected_plan_index(self):
        return self._selected

    def get_behavior_notes_for_plan_at_index(self, index):
        return [behavior_note(int(n)) for n in self._candidates[self._index(index)].behavior_notes]

    def get_numerical_notes_for_plan_at_index(self, index):
        return [numerical_note(int(n)) for n in self._candidates[self._index(index)].numerical_notes]

    def get_behavior_notes(self):
        self._require("no plan is built", self._selected is not None)
        return self.get_behavior_notes_for_plan_at_index(self._selected)

    def key(self):
        """A 64-bit key of the graph (ops, attributes, tensor signatures)."""
        return int(self.ir.key()[:16], 16)


def _knob(k):
    try:
        return knob_type(int(k))
    except ValueError:
        return int(k)


class knob:
    """A tunable knob of an engine: ``type`` (knob_type), ``min_value``, ``max_value``, ``stride`` and the
    engine's ``default_value``."""

    __slots__ = ("type", "min_value", "max_value", "stride", "default_value")

    def __init__(self, type, min_value, max_value, stride=1, default_value=None):
        self.type, self.min_value, self.max_value = type, int(min_value), int(max_value)
        self.stride, self.default_value = int(stride), default_value

    def values(self):
        return range(self.min_value, self.max_value + 1, self.stride)

    def __repr__(self):
        return (f"knob({self.type}, min_value={self.min_value}, max_value={self.max_value}, stride={self.stride}, "
                f"default_value={self.default_value})")
