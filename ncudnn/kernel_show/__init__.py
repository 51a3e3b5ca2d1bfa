"""``python -m ncudnn.kernels show ENGINE KNOB=VALUE ...``: the generated source of any engine config's kernels
(:mod:`.cli`), over small representative problems (:mod:`.problems`) and a recorder of generated sources
(:mod:`.capture`). A developer's tool beside the package's layers: it builds plans through ``engines.api``
and reads the kernels the build fetched; nothing imports it."""
