"""TensorBoard integration: the `torch_prof` plugin, its HTTP routes and background loading.

`plugin.py` maps routes to thin adapters over a `provider.TraceProvider`; `handlers.py` serves
the data routes of the view registry (`tb_plugin/views/`); `api.py` parses requests and builds
responses. `store.py` (`RunStore`, the provider) wires together `catalog.py` (scan thread, file
states, lookups), `tables.py` (parsed-table LRU, payload memo), `warmer.py` (background warm-up)
and `pool.py` (the parser-process scheduler; `parse_child.py` is what runs in the children).
"""
