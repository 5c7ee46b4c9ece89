"""The views: one folder per view (`overview/`, `operators/`, `kernels/`, `efficiency/`, `trace/`,
`memory/`, `modules/`, `distributed/`, `ranks/`, `gpu_idle/`, `diff/`), each holding its specs,
builders and CSV rows (`spec.py`), options (`options.py`) and payload types (`payload.py`),
beside `frontend/src/views/<view>/`; and what they share: `registry.py` (one line per folder),
`spec.py` (`ViewSpec`), `options.py` (reading options from text), `option_types.py` (shared
bounds), `tabs.py` (the tabs and their availability), `openapi.py` (generates
`tb_plugin/openapi.yaml`). Nothing is imported here, so an analysis module can import a view's
payload types alone.
"""
