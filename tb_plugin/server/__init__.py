"""TensorBoard integration: the `torch_prof` plugin, its HTTP routes and background loading.

`plugin.py` maps routes to thin adapters; `store.py` knows runs and their load state;
`pool.py` parses files in child processes; `api.py` parses requests and builds responses;
`handlers.py` serves the data routes of the view registry (`tb_plugin/views/`).
"""
