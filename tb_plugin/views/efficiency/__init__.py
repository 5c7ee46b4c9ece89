"""The Operator (its efficiency sections) view, all in this folder: its specs (`spec.py`: routes,
builders from tables and options to payloads, CSV rows), its options (`options.py`) and its
payload types (`*payload.py`). The analysis: `tb_plugin/analysis/efficiency/compiled.py,
analysis/efficiency/roofline.py, analysis/efficiency/flops.py, analysis/efficiency/hardware.py,
analysis/efficiency/precision.py`; the UI:
`frontend/src/views/operators (Efficiency.tsx)/`. No imports here: analysis modules import the
payload types alone."""
