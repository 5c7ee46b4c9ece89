"""torch-prof: a TensorBoard plugin for PyTorch profiler traces."""

__version__ = "0.1.0"
