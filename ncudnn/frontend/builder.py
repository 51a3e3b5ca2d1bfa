"""A generator for op methods with the frontend's call style: tensor ports positionally (in order) or by
keyword, then attributes; list-valued ports (``peer_stats``, ``inputs``) by keyword; ``name`` and
``compute_data_type`` by keyword. Multi-output methods return a list (None for an absent output)."""


def op_method(op, ports, attrs, outputs, lower, required=(), list_ports=(), present=None, suffix=None,
              defaults=None, doc=""):
    """``present(params, tensors, port) -> bool`` decides which outputs exist; ``suffix`` maps an output
    port to the label in its name (``"<name>::<label>"``); ``defaults`` fills omitted attributes."""
    names = tuple(ports) + tuple(attrs)

    def method(self, *args, name="", compute_data_type=None, **kwargs):
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
                            present=pres, suffix=suffix)

    method.__name__ = op
    method.__qualname__ = f"pygraph.{op}"
    method.__doc__ = doc or f"{op}({', '.join(names)}) -> {', '.join(outputs)}"
    return method
