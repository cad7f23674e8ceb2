"""The models and their weights: the PyG encoders and link decoders (:mod:`.gnn`,
:mod:`.hetero`), their dense parts as numpy arrays for inference on the CPU (:mod:`.dense`,
:mod:`.hetero_dense`), learned embedding tables in files (:mod:`.tables`), and a run's
checkpoints (:mod:`.checkpoints`; :mod:`.torchfile` reads them without PyTorch).
"""
