"""Step variance and slow-step root cause (`steps.py`): per span, the step-time CV, the outlier
steps by robust z-score, and for each outlier the cause that grew compared with the median step.
Nothing is imported here."""
