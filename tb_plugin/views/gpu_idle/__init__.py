"""The GPU Idle view, all in this folder: its specs (`spec.py`: routes, builders from tables and
options to payloads, CSV rows), its options (`options.py`) and its payload types
(`*payload.py`). The analysis: `tb_plugin/analysis/gpu_idle.py, analysis/idle.py,
analysis/critical_path.py, analysis/launch_stats.py, analysis/whatif/`; the UI:
`frontend/src/views/gpu_idle/`. No imports here: analysis modules import the payload types
alone."""
