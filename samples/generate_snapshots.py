"""Write the synthetic CUDA memory snapshots of `gpu_memory_snapshot/`: two ranks of a small
training loop as `torch.cuda.memory._dump_snapshot` writes them (the documented dict: segments
with their blocks, one trace per device), replayed by the test suite's allocator
(`tests/snapshot_data.py`). rank0 has two devices and a CUDA graph's private pool; rank1 runs
out of memory. No GPU was at hand to record real ones.

    python samples/generate_snapshots.py [--out samples]
"""

import argparse
import gzip
import pickle
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.snapshot_data import snapshot_of, training  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(REPO / "samples"))
    args = parser.parse_args(argv)
    run = Path(args.out) / "gpu_memory_snapshot"
    run.mkdir(parents=True, exist_ok=True)
    rank0 = snapshot_of([training(0, seed=10, steps=8, drop_first=20), training(1, seed=11, steps=8, graph_pool=True)])
    rank1 = snapshot_of([training(0, seed=12, steps=8, oom=True)])
    (run / "rank0.pickle").write_bytes(pickle.dumps(rank0, protocol=4))
    (run / "rank1.pickle.gz").write_bytes(gzip.compress(pickle.dumps(rank1, protocol=5), mtime=0))
    for path in sorted(run.iterdir()):
        print(f"{path}: {path.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
