"""Batches from a dataset on disk, over the Rust samplers and loaders: neighbor sampling
(:mod:`.sampler`), node batches (:mod:`.loader`), link batches (:mod:`.links`, :mod:`.pairs`),
typed sampling and loading (:mod:`.hetero`, :mod:`.sample`, :mod:`.typed`, :mod:`.features`,
:mod:`.plan`) and the CUDA copy path (:mod:`.cuda`); PyG's adapters are ``ringgnn.pyg``."""
