"""Distributed analysis: one rank (`rank.py`), the run over ranks (`run.py`, `summary.py`,
`match.py`, `tables.py`, `fsdp.py`, `modules.py`), the multi-rank timeline (`timeline.py`),
collective sizes (`comm_bytes.py`) and the view over several traces (`view.py`).
Nothing is imported here."""
