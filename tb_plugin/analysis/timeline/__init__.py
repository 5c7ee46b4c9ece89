"""The Trace view's analysis: the level-of-detail timeline (`view.py`) over its index
(`index.py`), counter tracks (`counters.py`), the critical-path marks (`critical.py`) and range
aggregates (`range.py`).
Nothing is imported here."""
