"""The view registry: which views (tabs) there are, and one `ViewSpec` per data route.

`tabs.py` holds the views and their availability; `registry.py` the specs, with their options in
`option_types.py` and their builders in `builders.py`; `options.py` how a spec's options are read
from text; `openapi.py` generates `tb_plugin/openapi.yaml` from them.
"""
