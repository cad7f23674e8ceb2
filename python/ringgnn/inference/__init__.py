"""Layer-wise inference out of core, one engine for every graph: entry points
(:mod:`.run`, :mod:`.hetero`), the engine (:mod:`.engine`, :mod:`.layers`), graph and folds
(:mod:`.graph`), outputs (:mod:`.rows`), the memory plan (:mod:`.plan`), source partitions
(:mod:`.partition`), finishing (:mod:`.finish`), pair scores (:mod:`.scoring`), link metrics
(:mod:`.metrics`) and what goes beside outputs (:mod:`.node_ids`, :mod:`.attach`)."""
