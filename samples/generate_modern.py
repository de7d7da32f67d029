"""Generate the sample traces of today's training stacks, recorded on CPU.

``generate.py`` records an eager CNN and classic DDP; this sibling records what current jobs
run, so that the plugin's compiled-region, distributed and Lightning views are developed and
tested against real ``torch.profiler`` output:

* ``cpu_compile/``     -- a ``torch.compile``d MLP (Inductor's C++ backend), forward and
  backward, with two batch sizes so that Dynamo recompiles the frame for a dynamic batch
  and the steps run the second compilation (``Torch-Compiled Region: 0/1``);
  Inductor's C++ kernels are recorded as ``graph_<n>_cpp_fused_*`` ops
  (``cpp.enable_kernel_profile``) inside ``graph_<n>_inductor_wrapper_call``.
* ``cpu_fsdp2_gloo/``  -- FSDP2 (``fully_shard``) on 2 ranks over gloo: ``FSDP::*``
  annotations and the collectives FSDP2 issues.
* ``cpu_mesh_2d_gloo/`` -- a 2 x 2 DeviceMesh (``dp`` x ``tp``) on 4 ranks: tensor parallel
  (DTensor, ``_c10d_functional`` collectives) over ``tp`` and FSDP2 over ``dp``, so the
  traces hold two named process groups (``mesh_dp``, ``mesh_tp``).
* ``cpu_lightning/``   -- a Lightning ``Trainer`` with ``PyTorchProfiler``: the
  ``[pl][profile]...`` hook ranges.

Each worker records one span of two steps, gzipped. Usage (from the repository root)::

    python samples/generate_modern.py [--out samples] [--runs cpu_compile,...]
"""

import argparse
import os
import shutil
import socket
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.profiler import ProfilerActivity

SEED = 0
BATCH_SIZE = 16
FEATURES, HIDDEN, CLASSES = 32, 64, 10
WAIT, WARMUP, ACTIVE = 1, 1, 2
NUM_STEPS = WAIT + WARMUP + ACTIVE


class MLP(nn.Module):
    """Two linear layers: small enough for a tiny trace, enough for TP's col/row split."""

    def __init__(self):
        super().__init__()
        self.up = nn.Linear(FEATURES, HIDDEN)
        self.act = nn.ReLU()
        self.down = nn.Linear(HIDDEN, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(self.act(self.up(x)))


def make_profiler(out_dir: Path, worker_name: str) -> torch.profiler.profile:
    """One span of ACTIVE steps, with the options the views need (shapes, stacks, modules)."""
    return torch.profiler.profile(
        activities=[ProfilerActivity.CPU],
        record_shapes=True,
        with_stack=True,
        with_modules=True,
        schedule=torch.profiler.schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE, repeat=1),
        on_trace_ready=torch.profiler.tensorboard_trace_handler(
            str(out_dir), worker_name=worker_name, use_gzip=True
        ),
    )


def batch(step: int, batch_size: int = BATCH_SIZE):
    generator = torch.Generator().manual_seed(SEED + step)
    return (torch.randn(batch_size, FEATURES, generator=generator),
            torch.randint(0, CLASSES, (batch_size,), generator=generator))


def train_steps(model: nn.Module, out_dir: Path, worker_name: str, batch_sizes=None):
    """NUM_STEPS SGD steps under the profiler; `batch_sizes[i]` is step i's batch size."""
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    with make_profiler(out_dir, worker_name) as prof:
        for step in range(NUM_STEPS):
            images, labels = batch(step, (batch_sizes or [BATCH_SIZE] * NUM_STEPS)[step])
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(images), labels).backward()
            optimizer.step()
            prof.step()


def run_compile(out_dir: Path):
    """torch.compile on CPU; the two batch sizes make Dynamo compile the frame twice
    (static shapes first, then a dynamic-batch graph that serves both sizes), both before
    the profiler starts so that compilation itself stays out of the trace."""
    import torch._inductor.config as inductor_config

    inductor_config.cpp.enable_kernel_profile = True  # record each C++ kernel as an op
    inductor_config.profiler_mark_wrapper_call = True  # and the generated graph's call
    torch.manual_seed(SEED)
    model = torch.compile(MLP())
    sizes = [BATCH_SIZE, BATCH_SIZE // 2] * (NUM_STEPS // 2)
    for size in sizes[:2]:  # warm both compiled graphs
        images, labels = batch(0, size)
        nn.functional.cross_entropy(model(images), labels).backward()
    train_steps(model, out_dir, "worker0", sizes)


def free_port() -> int:
    """Ask the OS for an unused loopback port for the rendezvous."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _spawn(worker, world_size: int, out_dir: Path):
    mp.spawn(worker, args=(world_size, free_port(), out_dir), nprocs=world_size, join=True)


def _join(rank: int, world_size: int, port: int):
    """Join a gloo group before the profiler starts, so traces carry ``distributedInfo``."""
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)  # several ranks share a small machine
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    torch.manual_seed(SEED)


def fsdp2_worker(rank: int, world_size: int, port: int, out_dir: Path):
    from torch.distributed.fsdp import fully_shard

    _join(rank, world_size, port)
    try:
        model = MLP()
        for layer in (model.up, model.down):
            fully_shard(layer)
        fully_shard(model)
        train_steps(model, out_dir, f"worker{rank}")
    finally:
        dist.destroy_process_group()


def mesh_2d_worker(rank: int, world_size: int, port: int, out_dir: Path):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    _join(rank, world_size, port)
    try:
        mesh = init_device_mesh("cpu", (2, world_size // 2), mesh_dim_names=("dp", "tp"))
        model = parallelize_module(MLP(), mesh["tp"], {"up": ColwiseParallel(), "down": RowwiseParallel()})
        fully_shard(model, mesh=mesh["dp"])
        train_steps(model, out_dir, f"worker{rank}")
    finally:
        dist.destroy_process_group()


def run_fsdp2(out_dir: Path):
    _spawn(fsdp2_worker, 2, out_dir)


def run_mesh_2d(out_dir: Path):
    _spawn(mesh_2d_worker, 4, out_dir)


def run_lightning(out_dir: Path):
    """A Lightning Trainer on CPU profiled by its PyTorchProfiler (one span of 2 steps)."""
    import lightning.pytorch as pl
    from lightning.pytorch.profilers import PyTorchProfiler
    from torch.utils.data import DataLoader, TensorDataset

    class LitMLP(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.model = MLP()

        def training_step(self, data, _):
            images, labels = data
            return nn.functional.cross_entropy(self.model(images), labels)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    torch.manual_seed(SEED)
    images, labels = batch(0, BATCH_SIZE * NUM_STEPS)
    profiler = PyTorchProfiler(
        dirpath=str(out_dir),
        filename="worker0",
        export_to_chrome=True,
        record_shapes=True,
        with_stack=True,
        schedule=torch.profiler.schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE, repeat=1),
        on_trace_ready=torch.profiler.tensorboard_trace_handler(str(out_dir), worker_name="worker0",
                                                                use_gzip=True),
    )
    trainer = pl.Trainer(accelerator="cpu", max_steps=NUM_STEPS, profiler=profiler, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(LitMLP(), DataLoader(TensorDataset(images, labels), batch_size=BATCH_SIZE))
    for leftover in out_dir.glob("*.txt"):  # the profiler's text summary: not a trace
        leftover.unlink()


RUNS = {
    "cpu_compile": run_compile,
    "cpu_fsdp2_gloo": run_fsdp2,
    "cpu_mesh_2d_gloo": run_mesh_2d,
    "cpu_lightning": run_lightning,
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent,
                        help="directory receiving the run folders (default: this script's folder)")
    parser.add_argument("--runs", default=",".join(RUNS), help="comma-separated runs to record")
    args = parser.parse_args()
    for name in args.runs.split(","):
        run_dir = args.out / name
        shutil.rmtree(run_dir, ignore_errors=True)
        run_dir.mkdir(parents=True)
        RUNS[name](run_dir)
        for trace in sorted(run_dir.iterdir()):
            print(f"{trace} {trace.stat().st_size} bytes")


if __name__ == "__main__":
    main()
