"""The Distributed view, all in this folder: its specs (`spec.py`: routes, builders from tables
and options to payloads, CSV rows), its options (`options.py`) and its payload types
(`*payload.py`). The analysis: `tb_plugin/analysis/distributed/rank.py, analysis/dist_*.py`; the UI:
`frontend/src/views/distributed/`. No imports here: analysis modules import the payload types
alone."""
