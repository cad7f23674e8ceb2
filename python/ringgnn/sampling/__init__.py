"""Batches from a dataset on disk: thin wrappers over the Rust samplers and loader. Neighbor
sampling (:mod:`.sampler`), node batches (:mod:`.loader`, which also cuts every loader's epochs),
link batches (:mod:`.links`, their pairs :mod:`.pairs`), heterogeneous sampling and loading
(:mod:`.hetero`, its sample :mod:`.sample`, :mod:`.typed`, :mod:`.features`, :mod:`.plan`,
:mod:`.hyper`) and the CUDA copy path (:mod:`.cuda`). PyG's adapters over them are the public module ``ringgnn.pyg``.
"""
