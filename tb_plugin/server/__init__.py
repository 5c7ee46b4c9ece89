"""TensorBoard integration: the `torch_prof` plugin, its HTTP routes and background loading.

`plugin.py` maps routes to thin adapters; `store.py` knows runs and their load state;
`pool.py` parses files in child processes; `api.py` parses requests and builds responses;
`views.py` and `routes.py` are the registries of views and data routes.
"""
