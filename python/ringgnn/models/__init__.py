"""The models and their weights: PyG encoders and decoders (:mod:`.gnn`, :mod:`.hetero`),
their numpy dense parts (:mod:`.dense`, :mod:`.hetero_dense`), embedding tables in files
(:mod:`.tables`) and checkpoints (:mod:`.checkpoints`, :mod:`.torchfile`)."""
