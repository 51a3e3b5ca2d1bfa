"""A generator for op methods with the frontend's call style: tensor ports positionally (in order) or by
keyword, then attributes; list-valued ports (``peer_stats``, ``inputs``) by keyword; ``name``,
``compute_data_type`` and ``out_dims`` (dims of outputs the IR cannot infer: a list for the first output,
or {port: dims}) by keyword. Multi-output methods return a list (None for an absent output)."""
from .enums import norm_forward_phase


def op_method(op, ports, attrs, outputs, lower, required=(), list_ports=(), present=None, suffix=None,
              defaults=None, doc=""):
    """``present(params, tensors, port) -> bool`` decides which outputs exist; ``suffix`` maps an output
    port to the label in its name (``"<name>::<label>"``); ``defaults`` fills omitted attributes."""
    names = tuple(ports) + tuple(attrs)

    def method(self, *args, name="", compute_data_type=None, out_dims=None, **kwargs):
        if args and "norm_forward_phase" in attrs and isinstance(args[0], norm_forward_phase):
            kwargs["norm_forward_phase"] = args[0]  # the older call style: phase first
            args = args[1:]
        if len(args) > len(names):
            raise TypeError(f"{op}() takes at most {len(names)} positional arguments {names}")
        given = dict(zip(names, args))
        for k in list(kwargs):
            if k in names or k in list_ports:
                if k in given:
                    raise TypeError(f"{op}() got multiple values for {k!r}")
                given[k] = kwargs.pop(k)
        if kwargs:
            raise TypeError(f"{op}() got unexpected arguments {sorted(kwargs)}; tensors are {tuple(ports)}, "
                            f"attributes {tuple(attrs)}")
        for p in required:
            if given.get(p) is None:
                raise TypeError(f"{op}() missing argument {p!r}")
        tensors = {p: given.get(p) for p in ports}
        for p in list_ports:
            tensors[p] = list(given.get(p) or [])
        params = dict(defaults or {})
        params.update({a: given[a] for a in attrs if given.get(a) is not None})
        pres = None
        if present is not None:
            def pres(port):
                return present(params, tensors, port)
        return self._add_op(op, name, tensors, params, list(outputs), lower, compute_data_type=compute_data_type,
                            present=pres, suffix=suffix, out_dims=out_dims)

    method.__name__ = op
    method.__qualname__ = f"pygraph.{op}"
    method.__doc__ = doc or f"{op}({', '.join(names)}) -> {', '.join(outputs)}"
    return method
