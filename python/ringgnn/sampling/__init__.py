"""Batches from a dataset on disk: thin wrappers over the Rust samplers and loader. Neighbor
sampling (:mod:`.sampler`), node batches (:mod:`.loader`), link batches (:mod:`.links`),
heterogeneous sampling and loading (:mod:`.hetero`, :mod:`.features`, :mod:`.plan`,
:mod:`.hyper`) and the CUDA copy path (:mod:`.cuda`). PyG's adapters over them are the public module
``ringgnn.pyg``.
"""
