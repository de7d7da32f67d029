"""Record the small GPU sample traces of today's training stacks (needs one CUDA GPU).

The CPU samples (``generate.py``, ``generate_modern.py``) cannot show what only a GPU
records; this script records it, on one GPU, so that the GPU-wait analyses (idle time,
launches, queues, sequences, annotations, the critical path), the Compiled view and FLOPs
are tested on real CUPTI output:

* ``gpu_h100_compiled/`` -- a small transformer trained with ``torch.compile(mode=
  "reduce-overhead")``: Inductor's Triton kernels replayed in CUDA graphs (cudagraph trees,
  ``cudaGraphLaunch``), forward and backward; the next batch copied from pinned memory on a
  side stream that the compute stream waits for (``cudaEventRecord`` /
  ``cudaStreamWaitEvent``, and the ``cuda_sync`` records CUPTI writes when asked by
  ``enable_cuda_sync_events``); an eager, unfused optimizer
  (``foreach=False``: many kernels shorter than their launch); ``record_function`` ranges,
  which CUPTI also records on the GPU (``gpu_user_annotation``); ``loss.item()`` every step
  (a blocking device-to-host copy) and ``with_flops``.
* ``gpu_h100_eager_nccl/`` -- the same model eager under ``DistributedDataParallel`` on a
  one-rank NCCL group: ``record_param_comms`` with its process group, cuBLAS kernels under
  their operators, and the same side-stream copy and unfused optimizer.

Beside each trace, ``tests/data/gpu_reference/<run>.key_averages.json`` keeps torch's own
``prof.key_averages()`` of the same steps (counts, CPU and device times, FLOPs): the outside
facts the tests check the plugin's operator numbers against. torch 2.11 writes no ``flops``
arg into the trace even with ``with_flops=True``, so the plugin's shape-based FLOPs are
checked against ``key_averages()``' own count.

Each run records one span of three steps, gzipped, after warm-up iterations that compile
and capture the graphs (capture is never profiled). Usage, from the repository root::

    python samples/generate_gpu.py [--out samples] [--runs gpu_h100_compiled,...]

About a minute on an H100, most of it Inductor compiling.
"""

import argparse
import json
import os
import shutil
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.profiler import ProfilerActivity, record_function

from generate_modern import free_port  # the sibling script, beside this one on sys.path

SEED = 0
BATCH, SEQ, DIM, HEADS, LAYERS, VOCAB = 8, 128, 256, 4, 2, 1000
WARM_UP_ITERATIONS = 6  # compile, cudagraph-tree warm-up and capture all happen here
WAIT, WARMUP, ACTIVE = 1, 1, 3


class TinyTransformer(nn.Module):
    """Embedding, a few encoder layers and a head: a training step of real kernel kinds."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        layer = nn.TransformerEncoderLayer(DIM, HEADS, dim_feedforward=4 * DIM, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, LAYERS, enable_nested_tensor=False)
        self.head = nn.Linear(DIM, VOCAB)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(self.embed(tokens)))


def make_profiler(out_dir: Path) -> torch.profiler.profile:
    return torch.profiler.profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
        record_shapes=True,
        profile_memory=True,
        with_stack=True,
        with_flops=True,
        with_modules=True,
        # CUPTI's synchronization records (cat "cuda_sync": which event a stream waited on),
        # off by default; the critical path follows them.
        experimental_config=torch._C._profiler._ExperimentalConfig(enable_cuda_sync_events=True),
        schedule=torch.profiler.schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE, repeat=1),
        on_trace_ready=torch.profiler.tensorboard_trace_handler(
            str(out_dir), worker_name="worker0", use_gzip=True
        ),
    )


class SideStreamLoader:
    """Pinned host batches copied to the GPU on a side stream, one step ahead.

    The compute stream waits for the copy with ``wait_stream``: an event recorded on the side
    stream and waited on by the compute stream, which is what the critical path follows.
    """

    def __init__(self, device: torch.device):
        generator = torch.Generator().manual_seed(SEED)
        self.host = [torch.randint(0, VOCAB, (BATCH, SEQ + 1), generator=generator).pin_memory()
                     for _ in range(4)]
        self.stream = torch.cuda.Stream(device)
        self.device = device
        self.step = 0
        self.ready = self._copy()

    def _copy(self) -> torch.Tensor:
        with torch.cuda.stream(self.stream), record_function("prefetch"):
            batch = self.host[self.step % len(self.host)].to(self.device, non_blocking=True)
        self.step += 1
        return batch

    def next(self) -> torch.Tensor:
        torch.cuda.current_stream(self.device).wait_stream(self.stream)
        batch = self.ready
        batch.record_stream(torch.cuda.current_stream(self.device))
        self.ready = self._copy()
        return batch


def train(model: nn.Module, step_fn, out_dir: Path, device: torch.device):
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False)
    loader = SideStreamLoader(device)
    loss_fn = nn.CrossEntropyLoss()

    def one_step():
        # A new iteration for cudagraph trees: the previous step's graph outputs may be reused.
        torch.compiler.cudagraph_mark_step_begin()
        with record_function("data"):
            batch = loader.next()
            tokens, targets = batch[:, :-1], batch[:, 1:]
        with record_function("forward_backward"):
            loss = loss_fn(step_fn(tokens).reshape(-1, VOCAB), targets.reshape(-1))
            loss.backward()
        with record_function("optimizer"):
            optimizer.step()
            # Gradients set to None, not zeroed: a zeroed gradient would be the previous step's
            # graph output, which cudagraph trees reuse for the next step's backward.
            optimizer.zero_grad(set_to_none=True)
        return loss.item()  # a blocking device-to-host copy, as most loops log the loss

    for _ in range(WARM_UP_ITERATIONS):
        one_step()
    torch.cuda.synchronize(device)
    with make_profiler(out_dir) as prof:
        for _ in range(WAIT + WARMUP + ACTIVE):
            one_step()
            prof.step()
    return prof


def key_averages_reference(prof: torch.profiler.profile) -> dict:
    """torch's own per-operator summary of the recorded steps: what the tests compare the
    plugin's operator counts, device times and FLOPs with (the trace itself carries no
    ``flops`` arg in torch 2.11, though ``key_averages()`` computes them)."""
    return {
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(0),
        "operators": {
            event.key: {
                "count": event.count,
                "flops": event.flops,
                "self_cpu_us": event.self_cpu_time_total,
                "cpu_us": event.cpu_time_total,
                "self_device_us": event.self_device_time_total,
                "device_us": event.device_time_total,
            }
            for event in prof.key_averages()
        },
    }


def run_compiled(out_dir: Path):
    device = torch.device("cuda", 0)
    torch.manual_seed(SEED)
    model = TinyTransformer().to(device)
    return train(model, torch.compile(model, mode="reduce-overhead"), out_dir, device)


def run_eager_nccl(out_dir: Path):
    device = torch.device("cuda", 0)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=device)
    try:
        torch.manual_seed(SEED)
        model = nn.parallel.DistributedDataParallel(TinyTransformer().to(device), device_ids=[0])
        return train(model, model, out_dir, device)
    finally:
        dist.destroy_process_group()


REFERENCE_DIR = Path(__file__).resolve().parent.parent / "tests" / "data" / "gpu_reference"
RUNS = {"gpu_h100_compiled": run_compiled, "gpu_h100_eager_nccl": run_eager_nccl}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent))
    parser.add_argument("--runs", default=",".join(RUNS), help="comma-separated run names")
    parser.add_argument("--reference", default=str(REFERENCE_DIR),
                        help="where <run>.key_averages.json (torch's own summary) is written")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("generate_gpu.py records GPU traces: no CUDA device is visible")
    for name in args.runs.split(","):
        out_dir = Path(args.out) / name
        shutil.rmtree(out_dir, ignore_errors=True)
        out_dir.mkdir(parents=True)
        prof = RUNS[name](out_dir)
        reference = Path(args.reference) / f"{name}.key_averages.json"
        reference.parent.mkdir(parents=True, exist_ok=True)
        reference.write_text(json.dumps(key_averages_reference(prof), indent=1, sort_keys=True) + "\n")
        print(f"{name}: " + ", ".join(f"{p.name} ({p.stat().st_size // 1024} KB)"
                                      for p in sorted(out_dir.iterdir())), flush=True)


if __name__ == "__main__":
    main()
