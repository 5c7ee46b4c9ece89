"""Memory analysis: the Memory view (`view.py`), memory records and curves (`records.py`,
`curves.py`), the leak rule (`leaks.py`), the memory-timeline export (`timeline.py`) and
allocator snapshots (`snapshot.py`, `snapshot_state.py`).
Nothing is imported here."""
