"""The recommendations: the facts they read (`facts.py`, filled by `diagnosis.py`), what each fix
would save (`costs.py`) and the rules (`recommendations.py`).
Nothing is imported here."""
