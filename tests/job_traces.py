"""Multi-rank jobs made from one real trace, for the job view's tests and benchmark: the trace
replicated once per rank, each copy on its own clock (a constant offset, as on another host),
optionally with a planted straggler (one rank paused for extra compute inside one step).

Editing happens on decoded JSON with a loop per event: this is test-data generation, never
product code."""

import copy
import gzip
from pathlib import Path

import orjson


def read_doc(path):
    data = Path(path).read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    doc = orjson.loads(data)
    return {"traceEvents": doc} if isinstance(doc, list) else doc


def step_range(doc, step):
    """(start, end) of the host-side ``ProfilerStep#<step>`` range, absolute µs."""
    for event in doc["traceEvents"]:
        if event.get("ph") == "X" and event.get("name") == f"ProfilerStep#{step}" \
                and str(event.get("cat", "")).lower() != "gpu_user_annotation":
            return float(event["ts"]), float(event["ts"]) + float(event["dur"])
    raise ValueError(f"the trace has no ProfilerStep#{step}")


def _is_kernel(event):
    return event.get("ph") == "X" and str(event.get("cat", "")).lower() == "kernel"


def _is_comm_kernel(event):
    return "nccl" in str(event.get("name", "")).lower()


def plant_straggler(doc, step, delay_us):
    """Pause the rank for `delay_us` of extra compute in `step`: at the start of the step's
    first compute kernel, every later event moves by the delay, every event spanning that
    instant grows by it, and a kernel of that length fills the gap on the same stream."""
    start, end = step_range(doc, step)
    firsts = [e for e in doc["traceEvents"] if _is_kernel(e) and not _is_comm_kernel(e) and start <= e["ts"] < end]
    if not firsts:
        raise ValueError(f"step {step} launched no compute kernel")
    first = min(firsts, key=lambda e: e["ts"])
    at = float(first["ts"])
    for event in doc["traceEvents"]:
        ts = event.get("ts")
        if not isinstance(ts, (int, float)):
            continue
        if ts >= at:
            event["ts"] = ts + delay_us
        elif isinstance(event.get("dur"), (int, float)) and ts + event["dur"] > at:
            event["dur"] = event["dur"] + delay_us
    doc["traceEvents"].append({
        "ph": "X", "cat": first["cat"], "name": "planted_straggler_kernel", "pid": first["pid"], "tid": first["tid"],
        "ts": at, "dur": delay_us, "args": {"device": first.get("args", {}).get("device", 0),
                                             "stream": first.get("args", {}).get("stream", first["tid"])}})
    return doc


def shift_clock(doc, offset_us):
    """The same trace as read by a clock `offset_us` ahead."""
    for event in doc["traceEvents"]:
        if isinstance(event.get("ts"), (int, float)):
            event["ts"] = event["ts"] + offset_us
    return doc


def write_job(source, directory, ranks, clock_offsets, straggler=None, delays=()):
    """Write `ranks` copies of the trace `source` as ``rank<r>.pt.trace.json.gz`` under
    `directory`, rank r on a clock `clock_offsets[r]` µs ahead, with distributedInfo saying its
    rank and the world size; `straggler` = (rank, step, delay_us) plants one, and `delays`, a
    sequence of such triples, plants more (ranks of a job that vary). Returns the paths."""
    base = read_doc(source)
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for rank in range(ranks):  # one copy per rank
        doc = copy.deepcopy(base)
        info = dict(doc.get("distributedInfo") or {"backend": "nccl"})
        info.update(rank=rank, world_size=ranks)
        doc["distributedInfo"] = info
        for planted_rank, step, delay_us in ([straggler] if straggler is not None else []) + list(delays):
            if planted_rank == rank and delay_us:
                plant_straggler(doc, step, delay_us)
        shift_clock(doc, clock_offsets[rank])
        path = directory / f"rank{rank}.pt.trace.json.gz"
        path.write_bytes(gzip.compress(orjson.dumps(doc), compresslevel=1))
        paths.append(path)
    return paths


def truncate(path):
    """Cut the trace at `path` in the middle of its JSON, as a crashed job leaves a file (gzip
    written whole around the cut JSON)."""
    path = Path(path)
    data = path.read_bytes()
    text = gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data
    path.write_bytes(gzip.compress(text[: len(text) // 2]))


def job_with_a_truncated_rank(source, directory, bad):
    """Two copies of the run directory `source` under `directory`: ``bad``, every trace with
    worker `bad`'s `truncate`d, and ``without``, the same job without that worker. Returns
    (bad, without) directories."""
    source, directory = Path(source), Path(directory)
    with_bad, without = directory / "bad", directory / "without"
    for target in (with_bad, without):
        target.mkdir(parents=True)
    for path in sorted(source.glob("*.pt.trace.json*")):
        (with_bad / path.name).write_bytes(path.read_bytes())
        if path.name.split(".")[0] == bad:
            truncate(with_bad / path.name)
        else:
            (without / path.name).write_bytes(path.read_bytes())
    return with_bad, without
