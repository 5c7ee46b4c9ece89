"""The view registry: which views (tabs) there are, and one `ViewSpec` per data route.

`tabs.py` holds the views and their availability; `registry.py` the specs; `options.py` how a
spec's options are read from text; `openapi.py` generates `tb_plugin/openapi.yaml` from them.
"""
