"""Layer-wise inference out of core, one engine for every graph: the entry points
(:mod:`.run`: ``ringgnn.infer``, ``ringgnn predict``/``embed``), the engine (:mod:`.engine`; a
homogeneous model's layers on it in :mod:`.layers`, a typed model's in :mod:`.hetero`), a CSC's
neighbor file and the one Rust fold (:mod:`.graph`), the layer files and outputs (:mod:`.rows`),
its memory plan (:mod:`.plan`), the source-partitioned scheme (:mod:`.partition`), finishing
blocks (:mod:`.finish`), exact pair scores (:mod:`.scoring`) and the link-prediction metrics
(:mod:`.metrics`, training's too), and what is written beside its outputs (:mod:`.node_ids`,
:mod:`.attach`).
"""
