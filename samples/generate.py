"""Generate the sample Kineto traces shipped in ``samples/``.

The plugin's loader, views and tests need real ``torch.profiler`` output rather
than hand-written JSON, so that they follow whatever the installed PyTorch
actually emits. This script records two small CPU-only runs:

* ``cpu_cnn/``       -- one process training a small CNN fed by a DataLoader.
* ``cpu_ddp_gloo/``  -- two DistributedDataParallel ranks over gloo on
  loopback, so the traces carry collective ops and ``distributedInfo``.

Each worker records two profiling spans (``repeat=2``), giving exactly two
``<worker>.<time_ns>.pt.trace.json.gz`` files per worker.

Usage (from the repository root)::

    python samples/generate.py [--out samples]
"""

import argparse
import os
import socket
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.profiler import ProfilerActivity
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

SEED = 0
BATCH_SIZE = 8
IMAGE_SIZE = 32
NUM_CLASSES = 10
WAIT, WARMUP, ACTIVE, REPEAT = 1, 1, 2, 2
# Exactly enough steps for the schedule to complete both spans.
NUM_STEPS = (WAIT + WARMUP + ACTIVE) * REPEAT
DDP_WORLD_SIZE = 2
RUN_DIRS = ("cpu_cnn", "cpu_ddp_gloo")


class ConvBlock(nn.Module):
    """Conv -> BatchNorm -> ReLU -> MaxPool, a module so it nests in the trace."""

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1)
        self.bn = nn.BatchNorm2d(out_channels)
        self.relu = nn.ReLU()
        self.pool = nn.MaxPool2d(2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(self.relu(self.bn(self.conv(x))))


class SmallCNN(nn.Module):
    """Three conv blocks and a linear head: deep enough for a module tree."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            ConvBlock(3, 8), ConvBlock(8, 16), ConvBlock(16, 16)
        )
        self.classifier = nn.Linear(16 * (IMAGE_SIZE // 8) ** 2, NUM_CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.features(x), 1))


def make_dataset(num_samples: int) -> TensorDataset:
    """Random images and labels; contents don't matter, only the op mix does."""
    generator = torch.Generator().manual_seed(SEED)
    images = torch.randn(num_samples, 3, IMAGE_SIZE, IMAGE_SIZE, generator=generator)
    labels = torch.randint(0, NUM_CLASSES, (num_samples,), generator=generator)
    return TensorDataset(images, labels)


def make_profiler(out_dir: Path, worker_name: str) -> torch.profiler.profile:
    """The profiler configuration every sample run shares."""
    return torch.profiler.profile(
        activities=[ProfilerActivity.CPU],
        record_shapes=True,
        profile_memory=True,
        with_stack=True,
        with_modules=True,
        schedule=torch.profiler.schedule(
            wait=WAIT, warmup=WARMUP, active=ACTIVE, repeat=REPEAT
        ),
        on_trace_ready=torch.profiler.tensorboard_trace_handler(
            str(out_dir), worker_name=worker_name, use_gzip=True
        ),
    )


def train(model: nn.Module, loader: DataLoader, out_dir: Path, worker_name: str):
    """Run NUM_STEPS SGD steps under the profiler, stepping it once per batch.

    Iterating the DataLoader inside the profiler is what produces the
    ``enumerate(DataLoader)#...`` annotations the plugin attributes to data
    loading.
    """
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    model.train()
    with make_profiler(out_dir, worker_name) as prof:
        for images, labels in loader:
            optimizer.zero_grad()
            loss = loss_fn(model(images), labels)
            loss.backward()
            optimizer.step()
            prof.step()


def run_single(out_dir: Path):
    """Single-process CNN training, worker ``worker0``."""
    torch.manual_seed(SEED)
    loader = DataLoader(
        make_dataset(NUM_STEPS * BATCH_SIZE),
        batch_size=BATCH_SIZE,
        shuffle=True,
        num_workers=0,
        generator=torch.Generator().manual_seed(SEED),
    )
    train(SmallCNN(), loader, out_dir, "worker0")


def ddp_worker(rank: int, world_size: int, port: int, out_dir: Path):
    """One DDP rank: join the gloo group, then train with its own profiler.

    The process group is initialised before the profiler starts so that
    PyTorch records ``distributedInfo`` in the trace metadata.
    """
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    # Keep the two ranks from oversubscribing the (possibly 2-core) machine.
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    try:
        torch.manual_seed(SEED)
        sampler = DistributedSampler(
            make_dataset(NUM_STEPS * BATCH_SIZE * world_size),
            num_replicas=world_size,
            rank=rank,
            seed=SEED,
        )
        loader = DataLoader(
            sampler.dataset, batch_size=BATCH_SIZE, sampler=sampler, num_workers=0
        )
        train(DistributedDataParallel(SmallCNN()), loader, out_dir, f"worker{rank}")
    finally:
        dist.destroy_process_group()


def free_port() -> int:
    """Ask the OS for an unused loopback port for the rendezvous."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_ddp(out_dir: Path):
    """Two-rank DDP over gloo on loopback, workers ``worker0``/``worker1``."""
    mp.spawn(
        ddp_worker,
        args=(DDP_WORLD_SIZE, free_port(), out_dir),
        nprocs=DDP_WORLD_SIZE,
        join=True,
    )


def clean(run_dir: Path):
    """Remove traces from a previous run so each worker ends up with two files."""
    run_dir.mkdir(parents=True, exist_ok=True)
    for trace in run_dir.glob("*.pt.trace.json*"):
        trace.unlink()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(__file__).resolve().parent,
        help="directory receiving the run folders (default: this script's folder)",
    )
    args = parser.parse_args()
    for name, run in zip(RUN_DIRS, (run_single, run_ddp)):
        run_dir = args.out / name
        clean(run_dir)
        run(run_dir)
        for trace in sorted(run_dir.glob("*.pt.trace.json.gz")):
            print(f"{trace} {trace.stat().st_size} bytes")


if __name__ == "__main__":
    main()
