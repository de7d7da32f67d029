"""Packaging: the plugin registers itself with TensorBoard through an entry point."""

from setuptools import find_packages, setup

setup(
    name="tb-plugin-pytorch-profiler",
    version="0.1.0",
    description="PyTorch Profiler plugin for TensorBoard: where a training step's time and memory go",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.9",
    packages=find_packages(include=["tb_plugin", "tb_plugin.*"]),
    # Every non-Python file the package reads at run time (tests/test_packaging.py checks the wheel).
    package_data={"tb_plugin": ["static/*", "openapi.yaml"], "tb_plugin.views": ["*.txt"]},
    install_requires=[
        "tensorboard>=2.11",
        "werkzeug>=2.0",
        "pandas>=1.5",
        "numpy>=1.23",
        # Splits a trace into one undecoded slice per event, and repairs odd events.
        "msgspec>=0.18",
        # Multi-threaded JSON-lines reader writing typed columns without a Python object per
        # event: what brings loading under orjson's time (benchmarks/README.md).
        "polars>=2.0",
        "orjson>=3.8",
        "fsspec>=2023.1",
        # The disk cache of parsed models: Arrow IPC files, data only (a cache entry never runs
        # code), written by many processes at once and read over fsspec; also what
        # `preprocess` writes. >= 14.0.1: no pickled extension types (CVE-2023-47248).
        "pyarrow>=14.0.1",
        # openapi.yaml, read by `python -m tb_plugin view` and `mcp` for the hand-written
        # routes' parameters (tb_plugin/agents/answers.py).
        "pyyaml>=5.1",
    ],
    extras_require={
        "s3": ["s3fs"],
        "gs": ["gcsfs"],
        "az": ["adlfs"],
        # `python -m tb_plugin preprocess --dask ...`: parses a log directory's traces as
        # dask.distributed tasks into the cache; only those who preprocess need it.
        "dask": ["dask[distributed]>=2023.1"],
        # `python -m tb_plugin mcp`: the data routes as tools of a Model Context Protocol
        # server, on the official SDK (its 2.x API: tb_plugin/agents/mcp_server.py).
        "mcp": ["mcp>=2"],
        "test": ["dask[distributed]>=2023.1", "mcp>=2","pytest>=7", "hypothesis>=6", "moto[server]>=5", "s3fs", "pyyaml", "torch==2.13.0",
                 # Drives Debian's Chromium in tests/e2e (its own browsers are never downloaded).
                 "playwright>=1.40",
                 # Drives Debian's Firefox over WebDriver BiDi in tests/e2e/engines.py.
                 "websocket-client>=1.6",
                 # tests/test_notebook.py runs a notebook showing reports on a real kernel.
                 "nbclient>=0.10", "nbformat>=5.9", "ipykernel>=6",
                 # tests/test_openapi_fuzz.py (parameter dictionaries; checked with 4.32.5).
                 "schemathesis>=4.32",
                 # tests/test_layering.py type-checks the public boundary (mypy.ini); pinned
                 # below the next major releases, whose new checks would fail CI unasked.
                 "mypy>=2.4,<3", "pandas-stubs>=3.1",
                 # The outside reference for the GPU-wait views (tests/hta_reference.py):
                 # idle time, launch statistics and queue lengths are checked against it.
                 "HolisticTraceAnalysis==0.5.0"],
    },
    entry_points={
        "tensorboard_plugins": ["pytorch_profiler = tb_plugin.server.plugin:ProfilerPluginLoader"],
        "console_scripts": ["tb-plugin = tb_plugin.__main__:main"],
    },
)
