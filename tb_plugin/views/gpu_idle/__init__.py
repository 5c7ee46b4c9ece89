"""The GPU Idle view, all in this folder: its specs (`spec.py`: routes, builders from tables and
options to payloads, CSV rows), its options (`options.py`) and its payload types
(`*payload.py`). The analysis: `tb_plugin/analysis/gpu_idle/view.py, analysis/gpu_idle/idle.py,
analysis/gpu_idle/critical_path.py, analysis/gpu_idle/launch_stats.py, analysis/whatif/`; the UI:
`frontend/src/views/gpu_idle/`. No imports here: analysis modules import the payload types
alone."""
