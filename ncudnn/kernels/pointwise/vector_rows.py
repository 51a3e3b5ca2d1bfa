"""Row-vector loads for generated row kernels (softmax, layer / RMS norm).

A row of ``n`` elements is ``nv = n // vec`` vectors of ``vec`` elements (one 16-byte access each, or
less for narrow rows); thread ``t`` of a ``block``-thread row owns vectors ``q = t + k * block`` for
``k < vpt``, so consecutive threads touch consecutive 16-byte words (coalesced). The loaded storage
values are widened to the compute type in registers by ``cx`` (see :func:`vector_names`); vector slots
past the row's end (only the last ones, ``(k + 1) * block > nv``) get a fill value instead of a load.
"""

__all__ = ["vec_ok", "row_vector_guards", "load_row_vectors", "vector_names"]


def vec_ok(n, itemsizes, vec):
    """True when rows of n elements can be read / written ``vec`` elements per access: n % vec == 0
    and each access of the widest tensor is 16 bytes at most (buffers aligned to ``vec * itemsize``
    is the caller's check)."""
    return vec > 1 and n % vec == 0 and vec * max(itemsizes) <= 16


def row_vector_guards(vpt, block, nv):
    """Per vector slot k: True when some thread's vector ``t + k * block`` lies past the row's end."""
    return [(k + 1) * block > nv for k in range(vpt)]


def load_row_vectors(vpt, block, nv, vec, fill, *, src="x", addr=None, cond=None, define_q=True, ind="    "):
    """(source lines, element names per slot, guards): the lines load slot k's vector into registers
    ``v{k}_{j}`` (j < vec), widened by ``cx`` (raw storage values ``rv{k}_{j}``), ``fill`` (source text)
    where the slot is past the row's end.

    ``addr(k)``: the element-index expression of slot k in ``src`` (default ``base + q{k} * vec``);
    ``cond(k)``: its in-row test (default ``q{k} < nv``); ``define_q``: emit ``q{k} = t + k * block``.
    """
    guard = row_vector_guards(vpt, block, nv)
    addr = addr or (lambda k: f"base + q{k} * {vec}")
    cond = cond or (lambda k: f"q{k} < {nv}")
    els = [[f"v{k}_{j}" for j in range(vec)] for k in range(vpt)]
    s = []
    for k in range(vpt):
        if define_q:
            s.append(f"{ind}q{k} = t + {k * block}")
        i2 = ind
        if guard[k]:
            s.append(f"{ind}if {cond(k)}:")
            i2 = ind + "    "
        s.append(f"{i2}{', '.join('r' + e for e in els[k])} = ldvx({src}, {addr(k)})")
        s += [f"{i2}{e} = cx(r{e})" for e in els[k]]
        if guard[k]:
            s.append(f"{ind}else:")
            s += [f"{ind}    {e} = {fill}" for e in els[k]]
    return s, els, guard


def vector_names(vec, x_dt, y_dt, ct):
    """The names the generated lines call: ``ldvx`` / ``stvy`` (``vec``-element load / store), ``cx``
    (x's storage value -> ``ct``), ``cy`` (a register -> y's storage value)."""
    from ..runtime.dtypes import dtype_name
    from .vector_io import to_compute, to_storage, vector_load, vector_store
    return dict(ldvx=vector_load(vec), stvy=vector_store(vec), cx=to_compute(dtype_name(x_dt), ct),
                cy=to_storage(dtype_name(y_dt)))
