"""``ringgnn serve``: the server (:mod:`.server`), the servicer, the model step, the gRPC plumbing
and the Python client (:mod:`.client`)."""
