"""Regressions planted into real traces by editing their events: the edit is simple enough
that the expected attribution follows from it without the code under test."""

import copy
import gzip
import json
import re

import numpy as np

STEP = re.compile(r"^ProfilerStep#\d+$")


def write_gz(folder, name, events):
    """`events` as a gzipped trace `folder/<name>.pt.trace.json.gz`; returns its path."""
    path = folder / f"{name}.pt.trace.json.gz"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(json.dumps({"traceEvents": events}).encode()))
    return path


def insert_gaps(events, points, gaps, own=None):
    """The edit every plant makes: `gaps[i]` µs of time inserted at `points[i]`. An event
    starting at or after a point starts that much later, one running across a point lasts
    that much longer, and each event of `own` (index -> gap) also lasts its own gap longer
    (a kernel stretched at its end)."""
    order = np.argsort(points)
    points, cumulative = np.asarray(points, float)[order], np.concatenate([[0.0], np.cumsum(np.asarray(gaps, float)[order])])
    own = own or {}
    edited = []
    for i, e in enumerate(events):
        e = copy.deepcopy(e)
        if "ts" in e and e.get("ph") != "M":
            ts = float(e["ts"])
            end = ts + float(e.get("dur", 0))
            e["ts"] = ts + cumulative[np.searchsorted(points, ts, side="right")]
            if "dur" in e:
                new_end = end + cumulative[np.searchsorted(points, end, side="left")] + own.get(i, 0.0)
                e["dur"] = max(new_end - e["ts"], 0.0)
        edited.append(e)
    return edited


def step_ranges(events):
    return sorted((e["ts"], e["ts"] + e["dur"]) for e in events if STEP.match(e.get("name", "")) and e.get("ph") == "X")


def in_steps(times, events):
    ranges = np.array(step_ranges(events))
    k = np.searchsorted(ranges[:, 0], times, side="right") - 1
    return (k >= 0) & (np.asarray(times) < ranges[np.clip(k, 0, None), 1])


def slower_data_loader(events, wait_us):
    """Every DataLoader `__next__` range `wait_us` longer (time inserted at its end). Returns
    the edited events and the expected change of the mean step time: the waits that fall
    inside ProfilerStep ranges, over the number of steps."""
    loader = {i: wait_us for i, e in enumerate(events)
              if e.get("ph") == "X" and e.get("name", "").startswith("enumerate(DataLoader)")}
    ends = [events[i]["ts"] + events[i]["dur"] for i in loader]
    in_step = in_steps(ends, events)
    edited = insert_gaps(events, ends, list(loader.values()), own=loader)
    return edited, wait_us * in_step.sum() / len(step_ranges(events))


def stretched_kernels(events, family, factor):
    """Every kernel whose name holds `family` `factor` times as long (time inserted at its
    end). Returns the edited events and {event index: time added}."""
    stretched = {i: (factor - 1) * e["dur"] for i, e in enumerate(events)
                 if e.get("cat") == "kernel" and family in e["name"]}
    points = [events[i]["ts"] + events[i]["dur"] for i in stretched]
    return insert_gaps(events, points, list(stretched.values()), own=stretched), stretched


def launch_times(events):
    """Per correlation id: the host launch's start, from the runtime events."""
    return {e["args"]["correlation"]: e["ts"] for e in events
            if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}


def stretched_step_change(events, stretched):
    """The change of the mean step time that `stretched_kernels` planted ({event index: time
    added}): the time added to the kernels launched inside steps, over the number of steps."""
    launches = launch_times(events)
    in_step = in_steps([launches[events[i]["args"]["correlation"]] for i in stretched], events)
    return sum(np.array(list(stretched.values()))[in_step]) / len(step_ranges(events))
