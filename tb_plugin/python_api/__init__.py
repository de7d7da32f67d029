"""The Python API, which works without a server: `Profile` over one trace, `Run` over a
directory of workers and spans, memory snapshots, the comparison of two runs that
`python -m tb_plugin compare` prints, and preprocessing a log directory into the disk cache."""
