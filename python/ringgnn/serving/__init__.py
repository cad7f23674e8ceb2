"""``ringgnn serve``: the glue around the Rust engines (:mod:`.server`), the one servicer
for every graph (:mod:`.servicer`), the model step (:mod:`.model`), the gRPC plumbing (:mod:`.rpc`)
and the Python client (:mod:`.client`, ``ringgnn.Client``).
"""
