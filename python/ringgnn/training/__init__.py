"""Training: the one loop (:mod:`.loop`, ``ringgnn train``), the tasks it runs as plug-ins
(:mod:`.tasks`), the curves and TensorBoard scalars of a run (:mod:`.curves`) and data parallelism
(:mod:`.distributed`).
"""
