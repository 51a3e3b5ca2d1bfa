"""A differential fuzzer: random valid graphs of every op family, run on every plan the heuristics give,
compared with the float64 oracle (``python -m ncudnn.fuzz --help``).

* :mod:`.spec`: seeded generators and layout helpers; ``family:seed:case`` names one graph.
* ``gen_*``: one generator per op family (:data:`.families.FAMILIES`); ``gen_tc`` (tensor-core
  matmul), ``gen_fastconv`` (1x1, Winograd, tensor-core conv), ``gen_attn`` (SDPA) and ``gen_stats``
  (BN statistics, RNG) draw the shapes the special-purpose engines accept.
* :mod:`.backend_graph`: a graph through the backend API (translated, or a backend operation given
  directly).
* :mod:`.bind`: buffers laid out exactly as declared, guards and gap checks.
* :mod:`.check`: the tolerance of a plan's precision and the comparison.
* :mod:`.runner`: one case, every plan, several input draws (in blocks: each plan on a block of draws).
* :mod:`.pool`: worker processes to a deadline; :mod:`.report`: the JSON and markdown summary (every
  registered engine listed).
"""
