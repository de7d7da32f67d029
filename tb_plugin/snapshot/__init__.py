"""CUDA caching-allocator snapshots (`torch.cuda.memory._dump_snapshot`): read safely and
decoded into columnar tables (`SnapshotModel`). Like `trace/`, this layer knows nothing of the
views, the loader or HTTP above it."""
