"""Training: the one loop (:mod:`.loop`), its task plug-ins (:mod:`.tasks`), the kinds of dataset
(:mod:`.kinds`, :mod:`.hetero`), times (:mod:`.temporal`), curves and data parallelism."""
