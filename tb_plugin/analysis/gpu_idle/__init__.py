"""The GPU Idle view's analysis: the view (`view.py`), idle time and queues (`idle.py`), launch
statistics (`launch_stats.py`) and the critical path (`critical_path.py`).
Nothing is imported here."""
