"""Training: the one loop (:mod:`.loop`, ``ringgnn train``), the tasks it runs as plug-ins
(:mod:`.tasks`), the kinds of dataset they run on (:mod:`.kinds`, the one-type case, and
:mod:`.hetero`, typed datasets), whether a run samples at times (:mod:`.temporal`), the curves
and TensorBoard scalars of a run (:mod:`.curves`) and data parallelism (:mod:`.distributed`).
"""
