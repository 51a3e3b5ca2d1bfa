"""A differential fuzzer: random valid graphs of every op family, run on every plan the heuristics give,
compared with the float64 oracle (``python -m ncudnn.fuzz --help``).

* :mod:`.spec`: seeded generators and layout helpers; ``family:seed:case`` names one graph.
* ``gen_*``: one generator per op family (:data:`.families.FAMILIES`).
* :mod:`.bind`: buffers laid out exactly as declared, guards and gap checks.
* :mod:`.check`: the tolerance of a plan's precision and the comparison.
* :mod:`.runner`: one case, every plan, several input draws.
* :mod:`.pool`: worker processes to a deadline; :mod:`.report`: the JSON and markdown summary.
"""
