"""Memory snapshots written the way `torch.cuda.memory._snapshot()` documents them, with the
facts the tests check known by construction: a small caching allocator replayed here (bump
allocation inside fixed-size segments, per device and per pool) that counts the bytes it has
allocated after every action. The first actions can be dropped from the written trace, as
`_record_memory_history(max_entries=...)` drops them, so allocations made before the trace
are only in `segments`."""

import random

SEGMENT_BYTES = 20 << 20  # `_memory_viz.segsum` draws segments of at least this size
ROUND = 512

USER = [{"filename": "/home/u/train.py", "line": 40, "name": "train_step"},
        {"filename": "/home/u/train.py", "line": 88, "name": "main"}]
MODEL = {"filename": "/home/u/model.py", "line": 21, "name": "forward"}
LINEAR = {"filename": "/usr/lib/python3/site-packages/torch/nn/modules/linear.py", "line": 125, "name": "forward"}
MODULE_CALL = {"filename": "/usr/lib/python3/site-packages/torch/nn/modules/module.py", "line": 1750, "name": "_call_impl"}
ADAM = {"filename": "/usr/lib/python3/site-packages/torch/optim/adam.py", "line": 320, "name": "_init_group"}
BACKWARD = {"filename": "/usr/lib/python3/site-packages/torch/autograd/graph.py", "line": 825, "name": "_engine_run_backward"}
CPP = {"filename": "Python/ceval.c", "line": 0, "name": "PyEval_EvalFrameDefault"}

# Stacks innermost frame first, as torch records them.
STACKS = {
    "activation": [LINEAR, MODULE_CALL, MODEL, MODULE_CALL, CPP, *USER],
    "gradient": [BACKWARD, USER[0], USER[1]],
    "optimizer": [ADAM, {"filename": "/home/u/train.py", "line": 52, "name": "train_step"}, USER[1]],
    "user": [{"filename": "/home/u/data.py", "line": 9, "name": "to_device"}, *USER],
}


class Allocator:
    def __init__(self, device, rng, t0):
        self.device, self.rng, self.t = device, rng, t0
        self.segments = []  # dicts: address, size, stream, pool, top
        self.live = {}  # addr -> (size, requested, frames, segment index)
        self.entries = []
        self.allocated_after = []  # bytes allocated after each entry
        self.reserved_after = []  # bytes in segments after each entry
        self.next_address = (device + 1) << 40

    def _entry(self, **fields):
        self.t += self.rng.randint(1, 40)
        fields.setdefault("stream", 0)
        self.entries.append({"time_us": self.t, **fields})
        self.allocated_after.append(sum(size for size, *_ in self.live.values()))
        self.reserved_after.append(sum(seg["size"] for seg in self.segments))

    def alloc(self, requested, kind, pool=(0, 0)):
        size = -(-requested // ROUND) * ROUND
        frames = STACKS[kind]
        for index, seg in enumerate(self.segments):
            if seg["pool"] == pool and seg["top"] + size <= seg["size"]:
                break
        else:
            seg = {"address": self.next_address, "size": max(SEGMENT_BYTES, size), "stream": 0, "pool": pool, "top": 0}
            self.next_address += seg["size"] + (1 << 30)
            self.segments.append(seg)
            index = len(self.segments) - 1
            self._entry(action="segment_alloc", addr=seg["address"], size=seg["size"], frames=frames, pool_id=pool)
        addr = seg["address"] + seg["top"]
        seg["top"] += size
        self.live[addr] = (size, requested, frames, index)
        self._entry(action="alloc", addr=addr, size=size, frames=frames, pool_id=pool)
        return addr

    def free(self, addr):
        size, _, frames, index = self.live[addr]
        pool = self.segments[index]["pool"]
        self._entry(action="free_requested", addr=addr, size=size, frames=frames, pool_id=pool)
        del self.live[addr]
        self._entry(action="free_completed", addr=addr, size=size, frames=frames, pool_id=pool)

    def oom(self, requested, device_free):
        self._entry(action="oom", size=requested, device_free=device_free, frames=STACKS["activation"])

    def segments_state(self):
        out = []
        for index, seg in enumerate(self.segments):
            blocks, cursor = [], seg["address"]
            for addr in sorted(a for a, v in self.live.items() if v[3] == index):
                size, requested, frames, _ = self.live[addr]
                if addr > cursor:
                    blocks.append({"address": cursor, "size": addr - cursor, "requested_size": 0,
                                   "state": "inactive", "frames": []})
                blocks.append({"address": addr, "size": size, "requested_size": requested,
                               "state": "active_allocated", "frames": frames})
                cursor = addr + size
            end = seg["address"] + seg["size"]
            if cursor < end:
                blocks.append({"address": cursor, "size": end - cursor, "requested_size": 0,
                               "state": "inactive", "frames": []})
            allocated = sum(b["size"] for b in blocks if b["state"] == "active_allocated")
            out.append({"device": self.device, "address": seg["address"], "total_size": seg["size"],
                        "stream": seg["stream"], "segment_type": "large", "segment_pool_id": seg["pool"],
                        "allocated_size": allocated, "active_size": allocated,
                        "requested_size": sum(b["requested_size"] for b in blocks), "blocks": blocks})
        return out


def training(device, seed, steps=6, oom=False, graph_pool=False, drop_first=0, t0=1_700_000_000_000_000):
    """One device's allocator after a few training steps: weights and optimizer state that
    stay, activations freed in backward, gradients, a CUDA graph's private pool when
    `graph_pool`, and an OOM at the end when `oom`. Returns the allocator; `drop_first`
    actions are left out of its trace (they happened before it)."""
    rng = random.Random(seed)
    a = Allocator(device, rng, t0)
    for _ in range(3):
        a.alloc(rng.randint(1, 4) << 20, "user")
    states = []
    for step in range(steps):
        acts = [a.alloc(rng.randint(1, 3000) * 1000 + rng.randint(0, 511), "activation") for _ in range(rng.randint(3, 8))]
        grads = [a.alloc(rng.randint(1, 2000) * 700, "gradient") for _ in range(3)]
        for addr in reversed(acts):
            a.free(addr)
        if step == 0:
            states = [a.alloc(rng.randint(1, 4) << 20, "optimizer") for _ in range(2)]
        for addr in grads:
            a.free(addr)
    if graph_pool:
        for _ in range(3):
            a.alloc(rng.randint(1, 5) << 20, "activation", pool=(1, 7))
    if oom:
        a.oom(3 << 30, device_free=123 << 20)
    a.drop_first = drop_first
    return a


def snapshot_of(allocators, device_count=None):
    """The snapshot dict of the allocators (one per device; devices without one have an empty trace)."""
    device_count = device_count or max(a.device for a in allocators) + 1
    traces = [[] for _ in range(device_count)]
    segments = []
    for a in allocators:
        traces[a.device] = a.entries[a.drop_first:]
        segments += a.segments_state()
    return {"segments": segments, "device_traces": traces,
            "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:False"}}


def standard_snapshot():
    """Two devices (device 1 with a private pool and an OOM at the end), the first 10 actions
    of device 0 before its trace."""
    return snapshot_of([training(0, seed=1, drop_first=10), training(1, seed=2, oom=True, graph_pool=True)])


def inconsistent_snapshot():
    """One 2 MiB segment held, and a trace whose only allocation (8 MiB, in no segment: its
    segment_alloc was never recorded) is alive at its OOM: 8 MiB allocated, 2 MiB reserved."""
    mib = 1 << 20
    frames = STACKS["user"]
    return {"segments": [{"device": 0, "address": 1 << 28, "total_size": 2 * mib, "stream": 0, "segment_type": "large",
                          "segment_pool_id": (0, 0), "allocated_size": 0, "active_size": 0, "requested_size": 0,
                          "blocks": [{"address": 1 << 28, "size": 2 * mib, "requested_size": 0, "state": "inactive",
                                      "frames": []}]}],
            "device_traces": [[{"action": "alloc", "addr": 9 << 28, "size": 8 * mib, "stream": 0, "time_us": 10,
                                "frames": frames},
                               {"action": "oom", "size": mib, "device_free": 0, "stream": 0, "time_us": 20,
                                "frames": frames}]],
            "allocator_settings": {}}
