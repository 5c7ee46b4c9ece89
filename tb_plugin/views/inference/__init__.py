"""The Inference view, all in this folder: its specs (`spec.py`: route, builder from a table to
the payload, CSV rows) and its payload types (`payload.py`). The analysis:
`tb_plugin/analysis/inference/`; the UI: `frontend/src/views/inference/`. No imports here:
analysis modules import the payload types alone."""
