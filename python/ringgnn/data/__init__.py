"""The dataset on disk as Python sees it and how one is made: :class:`~.dataset.Dataset` and
:class:`~.dataset.HeteroDataset` (reads go through the Rust core), the heterogeneous schema (relation
names ``"S:R:D"`` are parsed in :mod:`.schema` and nowhere else), the builds (:mod:`.build`:
``convert``, ``generate_rmat``, ``build_hetero``, ``verify``) and the generators. It imports nothing
of the package above it.
"""
