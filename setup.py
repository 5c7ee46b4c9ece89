"""Packaging for torch-prof, the PyTorch Profiler TensorBoard plugin.

torch is deliberately not a dependency: the plugin only reads trace JSON. The recorder
(`tb_plugin.recorder`) imports torch lazily, from the user's own training environment.
"""

from pathlib import Path

from setuptools import find_packages, setup

setup(
    name="torch-prof",
    version="0.1.0",
    description="TensorBoard plugin for PyTorch profiler traces: fast, offline, any trace size",
    long_description=(Path(__file__).parent / "README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    packages=find_packages(include=["tb_plugin", "tb_plugin.*"]),
    package_data={"tb_plugin": ["static/*", "static/**/*", "openapi.yaml"]},
    python_requires=">=3.9",
    install_requires=[
        "tensorboard>=2.11",
        "werkzeug>=2.0",
        "numpy>=1.22",
        "pandas>=1.5",
        "fsspec>=2023.1",
        "msgspec>=0.18",
        "isal>=1.0",
        "platformdirs>=3",
        "rich>=12",  # `torch-prof report --format table` (README: Dependencies, and why)
        "typing_extensions>=4.0",  # NotRequired for tb_plugin.payloads on Python < 3.11
    ],
    extras_require={
        # ray and duckdb so that CI runs the cluster and SQL tests; not pyarrow (pandas 3 would
        # import it at every start, which changes the benchmarks' memory baseline).
        "test": ["pytest>=7", "playwright>=1.40", "ruff>=0.5", "jsonschema>=4.18", "pyyaml>=6",
                 "ray>=2.9", "duckdb>=1.0", "hypothesis>=6.100", "mcp>=2.3"],
        "mcp": ["mcp>=2.3"],  # torch-prof mcp: the MCP server (stdio)
        "ray": ["ray>=2.9"],  # TORCH_PROF_CLUSTER / --cluster: parse on a Ray cluster
        "sql": ["duckdb>=1.0", "pyarrow>=14"],  # export --format parquet, sql; pyarrow for pandas
        "s3": ["s3fs"],
        "gcs": ["gcsfs"],
        "azure": ["adlfs"],
        "hdfs": ["pyarrow"],
    },
    entry_points={
        "tensorboard_plugins": ["torch_prof = tb_plugin.server.plugin:TorchProfPlugin"],
        "console_scripts": ["torch-prof = tb_plugin.cli:main"],
    },
)
