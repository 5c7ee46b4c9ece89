"""The Diff view's analysis: the aligned op trees (`tree.py`, `side.py`), the default experiment
(`pick.py`) and the kernel diff (`kernels.py`).
Nothing is imported here."""
