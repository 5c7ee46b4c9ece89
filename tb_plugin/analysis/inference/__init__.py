"""The inference view's analysis (issue 25 item 4): serving steps of vLLM and SGLang traces.
`annotations.py` reads a step annotation's name (phase, batch and token counts), `steps.py`
cuts the steps with their device work and the steady-state window, `bandwidth.py` estimates
the bytes a decode step moves, and `view.py` builds the `/inference` payload (per step, per
phase: time by op category, per-token latency, decode memory-bandwidth utilization)."""
