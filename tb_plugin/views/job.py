"""Job view: every rank of one span side by side. Where each rank's steps went, which rank
holds the job back in which step and why, kernels and operators compared across ranks, and
each collective call matched across ranks with the spread of the ranks' arrival at it.

A rank whose trace does not load (a truncated file of a crashed job) is left out and named
with its reason (``missing``); the verdict says how many of the span's ranks it covers.

Like the Distributed view it is a small per-rank part (`rank_part`, built from one model and
kept by the server after the model is dropped) and a `combine` step over the parts, so a job
of 1,000 ranks never needs more than one model in memory.

Definitions
-----------
Per rank and step, from the Overview's step breakdown of that rank (`common.step_breakdown`,
whose parts sum exactly to the step's wall time):

- step_us = the step's wall time;
- compute_us = kernel + memcpy + memset time, and on a rank without device activity (a CPU
  job) its CPU Exec time;
- exposed_comm_us = the breakdown's Communication: collective time no compute hid;
- dataloader_us = the breakdown's DataLoader;
- host_us = Runtime (launches, synchronisation calls) plus, on a rank with device activity,
  CPU Exec: host work while the device had nothing to run;
- idle_us = the breakdown's Other: neither device nor host was doing anything attributed.

These five parts sum to step_us.

Stragglers. In a synchronous job every rank waits at the step's collectives for the last one
to arrive, so the rank that holds the job back has the longest *work* (step_us -
exposed_comm_us) while the others' exposed communication absorbs the difference; a rank can
also be slow in the collective itself (a slow link), which shows as a longer step. For each
step, each rank's work and step time are compared with the median over the ranks, spread
measured by the scaled median absolute deviation (1.4826 MAD, which equals the standard
deviation for normal noise). With fewer than `LEAVE_ONE_OUT_BELOW` ranks the median and MAD
for a rank are taken over the *other* ranks, so that with two ranks the slower one is
compared with the faster one rather than with their midpoint. Each excess is measured two
ways: in percent of the baseline (median) step time, and in robust deviations (the excess
over the scaled MAD of that measure; none where the other ranks do not vary). A rank's step is
a straggler when, on its work or on its step time, the excess is at least `STRAGGLER_MIN_US`
and either far outside on one measure (`STRAGGLER_FAR_PCT` percent; or `STRAGGLER_FAR_MAD_Z`
deviations and at least `STRAGGLER_FAR_Z_MIN_PCT` percent) or outside on both
(`STRAGGLER_MIN_PCT` percent and `STRAGGLER_MAD_Z` deviations); a longer step counts only when
the rank's work is not below the median (else the rank merely waited longer for the others).
The stragglers table gives both sizes and which test held. The verdict is one plain sentence
(which rank held the job back most, in which step, by how much, from what) with its rule
beside it: the very test that flagged that rank with the rank's two sizes, so that the two
never disagree; when no rank is flagged, every test and the largest excess found. A step is measured as
torch-tb-profiler 0.4.3 does, from its ``ProfilerStep#N`` host range to the end of the device
work launched in it; where that work runs past the host range (into the next step's), the
straggler's ``host_range`` says so, naming the ranges a user finds in the trace. Its cause is
the part
(compute, data loading, host/launch, communication wait, idle) that exceeds that part's
baseline by the most.

Clock alignment. Each rank's timestamps come from its host's clock. All ranks leave a
collective at nearly the same instant, so the offset of rank r is the median, over the calls
it shares with the reference rank (the lowest rank), of the difference between their ends
(the end of the call's last communication kernel, or of its host interval for host-only
backends such as gloo). Arrival times are compared after adding each rank's offset; ranks
sharing no call with the reference keep offset 0 and are marked not aligned. The Trace view's
ranks mode moves each rank's timeline by the same offsets (`views.rank_timeline`).

Bandwidth of a collective call, as the Distributed view defines it (NCCL's tests): algbw =
S / t and busbw = algbw x the collective's bus factor, with t the call's data-transfer time
(its shortest duration over the ranks) and S its message size (`collectives.collective_calls`:
``message_bytes`` and ``bus_factor``); null where either is unknown, and, with the reason,
where nothing that ran the transfer was recorded or the group has one rank (as there).
"""

import warnings
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from ..schema import NULLABLE, SPAN, Persisted, choice, declare, documented, route, tab
from ..trace.model import TraceModel
from .collectives import WORKER_CALLS, collective_calls, match_calls
from .common import collective_op_mask, device_activity, step_breakdown, step_windows
from .coverage import MISSING_RANKS, MissingRank, coverage_text, missing_ranks
from .health import HEALTH, health
from .kernels import kernels as kernel_table
from .operators import operators as operator_table

LEAVE_ONE_OUT_BELOW = 8
STRAGGLER_MAD_Z = 3.5  # Iglewicz and Hoaglin's cut-off for modified z-scores
STRAGGLER_MIN_PCT = 5.0
# Far outside on one measure alone: twice either cut-off (the deviations only with a
# percent floor, so that ranks which hardly vary do not flag noise).
STRAGGLER_FAR_PCT = 10.0
STRAGGLER_FAR_MAD_Z = 7.0
STRAGGLER_FAR_Z_MIN_PCT = 1.0
STRAGGLER_MIN_US = 50.0
MAD_TO_SIGMA = 1.4826

RANK_STEPS = declare(
    "job_rank_steps", "one rank's one step, its wall time split into parts that sum to it",
    ("rank", "int64", "", "the rank (distributedInfo.rank, else the worker's position in the run)"),
    ("worker", "str", "", "the worker whose trace this rank's numbers come from"),
    ("step", "int64", "", "the ProfilerStep#N number (0: a trace without steps is one step)"),
    ("step_us", "float64", "us", "the step's wall time on this rank"),
    ("compute_us", "float64", "us", "kernels, memcpy and memset (CPU Exec on a rank without device work)"),
    ("exposed_comm_us", "float64", "us", "collective time that no compute hid"),
    ("idle_us", "float64", "us", "time neither the device nor the host was doing attributed work"),
    ("dataloader_us", "float64", "us", "time in DataLoader ranges not hidden by device work"),
    ("host_us", "float64", "us", "launch and other host time while the device had nothing to run"),
    ("start_us", "float64", "us", "the step's start (0.4.3's rule), from this rank's trace origin"),
    ("end_us", "float64", "us", "the step's end: its host range's end or its device work's, the later"),
    ("host_start_us", "float64", "us", "start of the ProfilerStep#N host range"),
    ("host_end_us", "float64", "us", "end of the ProfilerStep#N host range"),
)
STRAGGLERS = declare(
    "job_stragglers", "one rank's step that held the job back",
    ("rank", "int64", "", "the straggling rank"),
    ("worker", "str", "", "its worker"),
    ("step", "int64", "", "the step"),
    ("measure", "str", "", "what was longer: work (step minus exposed communication) or step (wall time)"),
    ("excess_us", "float64", "us", "how much longer its work (or step) took than the other ranks' median"),
    ("excess_pct", "float64", "pct", "excess_us as a share of the other ranks' median step time"),
    ("deviations", "float64", "", "excess_us in robust deviations (1.4826 MAD of the measure); null when the others do not vary",
     NULLABLE),
    ("flagged_by", "str", "", "the test that held: percent, deviations, percent and deviations, or percent (others equal: the joint test at its percent alone)"),
    ("cause", "str", "", "the part that grew most: compute, data loading, host/launch, communication wait, idle"),
    ("host_range", "str", "", "the ProfilerStep#N host range, and where its device work ran past it (the whole "
     "trace on a rank without ProfilerStep markers)"),
    ("detail", "str", "", "the numbers behind the cause, in words"),
)
# A name's total per rank summarised over the ranks (`_across`).
_ACROSS_RANKS = (
    ("ranks", "int64", "count", "ranks that ran it"),
    ("min_us", "float64", "us", "the smallest total over the ranks that ran it"),
    ("median_us", "float64", "us", "the median total"),
    ("max_us", "float64", "us", "the largest total"),
    ("spread_pct", "float64", "pct", "how much the largest exceeds the median: 100 (max - median) / median",
     NULLABLE),
    ("slowest_rank", "int64", "", "the rank with the largest total"),
)
KERNELS_ACROSS = declare(
    "job_kernels", "one kernel name, its total time per rank summarised over the ranks",
    ("name", "str", "", "the kernel's name"), *_ACROSS_RANKS)
OPERATORS_ACROSS = declare(
    "job_operators", "one operator name, its self time per rank summarised over the ranks",
    ("name", "str", "", "the operator's name"),
    ("measure", "str", "", "which time is compared: device_self on ranks with device work, else host_self"),
    *_ACROSS_RANKS)
COLLECTIVES_ACROSS = declare(
    "job_collectives", "one collective call matched across ranks (as the Distributed view matches calls)",
    ("name", "str", "", "the collective"),
    ("match_group", "str", "", "the process group (matched by sequence number) or name and size (by order)"),
    ("match_index", "int64", "", "the sequence number, or the occurrence within match_group"),
    ("ranks", "int64", "count", "ranks holding this call"),
    ("first_arrival_us", "float64", "us", "first rank's arrival, on the reference rank's clock, from its trace origin"),
    ("arrival_spread_us", "float64", "us", "last arrival minus first arrival, clocks aligned"),
    ("first_rank", "int64", "", "the rank that arrived first"),
    ("last_rank", "int64", "", "the rank that arrived last: the one the others waited for"),
    ("size_bytes", "float64", "bytes", "NCCL's message size S of the call (its larger buffer); null when unknown",
     NULLABLE),
    ("transfer_us", "float64", "us", "the shortest duration over the ranks: the data movement itself; null when what "
     "ran the transfer was not recorded (Distributed view's transfer_measured)", NULLABLE),
    ("algbw_gbps", "float64", "gb/s", "algorithm bandwidth S / t; null when the size is unknown or no_bandwidth_reason says why",
     NULLABLE),
    ("busbw_gbps", "float64", "gb/s", "bus bandwidth: algbw times NCCL's factor for the collective", NULLABLE),
    ("no_bandwidth_reason", "str", "", "why the bandwidths are null though the size may be known ('' when they are not)"),
)
VERDICT = declare(
    "job_verdict", "the job in one row: how many ranks, steps and straggling rank-steps, and what that means",
    ("ranks", "int64", "count", "ranks in the job view: those whose trace loaded"),
    ("ranks_total", "int64", "count", "workers of the span, loaded or not (missing names those that did not load)"),
    ("steps", "int64", "count", "distinct steps over the ranks"),
    ("stragglers", "int64", "count", "straggling rank-steps"),
    ("text", "str", "", "one plain sentence: which rank held the job back most, in which step and why; or that none did"),
    ("rule", "str", "", "the rule the sentence applied: for a straggler the test that flagged it and its two sizes, "
     "else every test and the largest excess's sizes ('' with fewer than two ranks)"),
    ("coverage", "str", "", "how many of the span's ranks the verdict covers, naming each that did not load and why"),
)
JOB_HEALTH = declare(
    "job_health", "one trace health finding of one rank (the Overview's Trace health card, per rank; `views.health`)",
    ("rank", "int64", "", "the rank"), ("worker", "str", "", "its worker"), *HEALTH.columns)
CLOCKS = declare(
    "job_clocks", "one rank's clock offset applied to align it with the reference rank",
    ("rank", "int64", "", "the rank"),
    ("worker", "str", "", "its worker"),
    ("offset_us", "float64", "us", "added to this rank's absolute timestamps (0 for the reference)"),
    ("matched_calls", "int64", "count", "collective calls shared with the reference rank that gave the offset"),
    ("aligned", "bool", "", "whether an offset could be measured (the reference counts as aligned)"),
)

_PARTS = (("compute_us", "compute"), ("dataloader_us", "data loading"), ("host_us", "host/launch"),
          ("exposed_comm_us", "communication wait"), ("idle_us", "idle"))


@dataclass(eq=False)  # identity semantics: held weakly by the server's reply cache
class RankPart:
    """What the job view needs of one rank's model: small tables (see `combine`)."""

    rank: int
    origin_us: float
    step_markers: bool
    steps: pd.DataFrame
    kernels: pd.DataFrame
    operators: pd.DataFrame
    calls: pd.DataFrame
    health: pd.DataFrame


# A `RankPart` as the disk cache stores it.
RANK_PART = Persisted("job", RankPart, {
    "steps": declare("job_part_steps", "one step of one rank, before its rank and worker are named",
                     *RANK_STEPS.columns_named(*RANK_STEPS.names[2:])),
    "kernels": declare("job_part_kernels", "one kernel name of one rank: its total time",
                       KERNELS_ACROSS.column("name"), ("total_us", "float64", "us", "summed duration of its launches")),
    "operators": declare("job_part_operators", "one operator name of one rank (collectives left out): its self time",
                         *OPERATORS_ACROSS.columns_named("name", "measure"),
                         ("total_us", "float64", "us", "its device_self or host_self time, as measure says")),
    "calls": declare("job_part_calls", "one collective call of one rank, with when it arrived and finished",
                     *WORKER_CALLS.columns,
                     ("arrival_us", "float64", "us", "when the rank could start moving data: its first kernel's start, "
                      "else the host call's start"),
                     ("finish_us", "float64", "us", "when the call ended for it: its last kernel's end, else the host "
                      "call's end")),
    "health": HEALTH,
}, scalars=declare("job_part_rank", "one rank's trace as the job view keeps it",
                   ("rank", "int64", "", "distributedInfo.rank, -1 when the trace gives none"),
                   ("origin_us", "float64", "us", "the trace's origin: its times are offsets from it"),
                   ("step_markers", "bool", "", "the trace has ProfilerStep#N markers (else it is one step, "
                    "number 0, over the whole trace)")))


def rank_part(model: TraceModel) -> RankPart:
    """The `RankPart` of one rank's model (rank -1 when its distributedInfo gives none)."""
    rank = _int_or(model.distributed.get("rank"), -1)
    breakdown = step_breakdown(model)
    windows = step_windows(model)
    has_device = len(device_activity(model)) > 0
    cpu_exec = breakdown["cpu_exec_us"].to_numpy()
    steps = pd.DataFrame({
        "step": breakdown["step"].to_numpy(),
        "step_us": breakdown["total_us"].to_numpy(),
        "compute_us": (breakdown["kernel_us"] + breakdown["memcpy_us"] + breakdown["memset_us"]).to_numpy()
        + (0.0 if has_device else cpu_exec),
        "exposed_comm_us": breakdown["communication_us"].to_numpy(),
        "idle_us": breakdown["other_us"].to_numpy(),
        "dataloader_us": breakdown["dataloader_us"].to_numpy(),
        "host_us": breakdown["runtime_us"].to_numpy() + (cpu_exec if has_device else 0.0),
        **{c: windows[c].to_numpy() for c in ("start_us", "end_us", "host_start_us", "host_end_us")},
    })
    k = kernel_table(model)[["name", "total_us"]]
    ops = operator_table(model)
    ops = ops[~ops["name"].isin(_collective_names(model))]
    measure = "device_self" if has_device else "host_self"
    operators = pd.DataFrame({"name": ops["name"].to_numpy(), "measure": measure,
                              "total_us": ops[f"{measure}_us"].to_numpy()})
    calls = collective_calls(model)
    on_device = calls["on_device"].to_numpy()
    # arrival: when the rank could start moving data (its kernel started, or the host call
    # began); finish: when the call ended for it (its last kernel, or the host call)
    calls = calls.assign(
        arrival_us=np.where(on_device, calls["device_start_us"].to_numpy(), calls["start_us"].to_numpy()),
        finish_us=np.where(on_device, calls["device_end_us"].to_numpy(), calls["end_us"].to_numpy()))
    return RankPart(rank=rank, origin_us=float(model.origin_us), step_markers=bool(len(model.steps)), steps=steps,
                    kernels=k, operators=operators, calls=calls, health=health(model))


def _int_or(value: Any, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _collective_names(model: TraceModel) -> set[str]:
    """Names of the collective ops: they are compared in the collectives table, not here."""
    return set(model.ops["name"].to_numpy()[collective_op_mask(model)].astype(str))


@dataclass
class JobView:
    """Tables of the job view (see the module's docstring for definitions) and a verdict."""

    rank_steps: pd.DataFrame
    stragglers: pd.DataFrame
    kernels: pd.DataFrame
    operators: pd.DataFrame
    collectives: pd.DataFrame
    clocks: pd.DataFrame
    verdict: pd.DataFrame
    missing: pd.DataFrame
    health: pd.DataFrame


def job(models: Mapping[str, TraceModel], align_clocks: bool = True) -> JobView:
    """The `JobView` of {worker name: model of one span}; see `combine`."""
    return combine({worker: rank_part(model) for worker, model in models.items()}, align_clocks=align_clocks)


@documented(VERDICT, RANK_STEPS, STRAGGLERS, KERNELS_ACROSS, OPERATORS_ACROSS, COLLECTIVES_ACROSS, CLOCKS,
            MISSING_RANKS, JOB_HEALTH)
def combine(parts: Mapping[str, RankPart], missing: Mapping[str, MissingRank] | None = None,
            align_clocks: bool = True) -> JobView:
    """The `JobView` of {worker name: `RankPart`}, the ranks that loaded; `missing` is
    {worker: `coverage.MissingRank`} of the span's workers whose trace did not load.

    Returns
    -------
    JobView with tables ``rank_steps`` (`RANK_STEPS`), ``stragglers`` (`STRAGGLERS`, largest
    excess first), ``kernels`` (`KERNELS_ACROSS`) and ``operators`` (`OPERATORS_ACROSS`),
    largest spread first, ``collectives`` (`COLLECTIVES_ACROSS`, in order of first arrival),
    ``clocks`` (`CLOCKS`), ``verdict`` (`VERDICT`, one row): the text says which rank held
    the job back most and why, or that no rank did, its rule the test it applied, its coverage
    how many of the span's ranks it covers; ``missing`` (`MISSING_RANKS`): each worker left
    out, with its reason; and ``health`` (`JOB_HEALTH`): each rank's trace health findings
    (`views.health.health`), by rank. Every number is the same as that of the job without those workers.

    A rank is the trace's distributedInfo rank; when a worker has none, or two claim the same
    one (separate jobs in one run), every worker's position in the run stands for its rank.

    With ``align_clocks=False`` every offset is 0: arrival times are compared on the ranks'
    own clocks (right when all ranks ran on one host).
    """
    workers = list(parts)
    ranks = job_ranks(parts)
    rank_steps = RANK_STEPS.frame(_stack([parts[w].steps for w in workers], RANK_STEPS.names, rank=ranks,
                                         worker=workers)
                                  ).sort_values(["step", "rank"], kind="stable").reset_index(drop=True)
    calls = _matched_calls(parts, workers, ranks)
    clocks = _clocks(workers, ranks, calls if align_clocks else None)
    excesses = _excesses(rank_steps) if len(rank_steps) else None
    unmarked = {int(rank) for rank, w in zip(ranks, workers) if not parts[w].step_markers}
    stragglers = STRAGGLERS.frame(_stragglers(rank_steps, excesses, unmarked))
    return JobView(
        rank_steps=rank_steps,
        stragglers=stragglers,
        kernels=KERNELS_ACROSS.frame(_across(parts, workers, ranks, "kernels", ["name"])),
        operators=OPERATORS_ACROSS.frame(_across(parts, workers, ranks, "operators", ["name", "measure"])),
        collectives=COLLECTIVES_ACROSS.frame(_collectives(parts, workers, ranks, clocks, calls)),
        clocks=CLOCKS.frame(clocks),
        verdict=_verdict(rank_steps, stragglers, excesses, missing or {}),
        missing=missing_ranks(missing or {}),
        health=JOB_HEALTH.frame(_stack([parts[w].health for w in workers], JOB_HEALTH.names, rank=ranks, worker=workers)
                                ).sort_values("rank", kind="stable").reset_index(drop=True),
    )


def job_ranks(parts: Mapping[str, RankPart]) -> np.ndarray:
    """The rank of each worker of {worker: `RankPart`}, in order: its distributedInfo rank, or
    when a worker has none or two claim the same one (separate jobs in one run, each "rank
    0"), every worker's position in the run."""
    ranks = np.array([parts[w].rank for w in parts], dtype=np.int64)
    if (ranks < 0).any() or len(np.unique(ranks)) != len(ranks):
        ranks = np.arange(len(ranks), dtype=np.int64)
    return ranks


@documented(CLOCKS)
def clocks(parts: Mapping[str, RankPart], align_clocks: bool = True) -> pd.DataFrame:
    """The `CLOCKS` table of {worker: `RankPart`} (the job view's ``clocks``), by rank: the
    offset that aligns each rank with the lowest one (see the module's docstring); all 0
    with ``align_clocks=False``."""
    workers, ranks = list(parts), job_ranks(parts)
    return CLOCKS.frame(_clocks(workers, ranks, _matched_calls(parts, workers, ranks) if align_clocks else None))


def _stack(frames: Sequence[pd.DataFrame], columns: list[str], **per_frame: Sequence[object] | npt.NDArray[Any]) \
        -> pd.DataFrame:
    """The frames one under another (`columns` when all are empty), with a column per
    `per_frame` keyword holding that frame's value on each of its rows: one concat and one
    repeat, not a copy of every rank's frame to tag it (1,024 ranks' parts are combined)."""
    lengths = np.array([len(f) for f in frames], dtype=np.int64)
    kept = [f for f in frames if len(f)]
    if not kept:
        return pd.DataFrame({c: [] for c in columns})
    stacked = pd.concat(kept, ignore_index=True)
    for name, values in per_frame.items():
        values = np.asarray(values)
        stacked[name] = np.repeat(values.astype(object) if values.dtype.kind == "U" else values, lengths)
    return stacked


def _baselines(matrix: npt.NDArray[np.float64]) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Per cell of a steps x ranks matrix (NaN: the rank lacks the step): the median of the
    step's values and 1.4826 x their median absolute deviation, over the other ranks when
    there are fewer than `LEAVE_ONE_OUT_BELOW` ranks, else over all of them."""
    # nanmedian of an all-NaN row (a step that only one rank has) warns; such rows are expected
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        if matrix.shape[1] >= LEAVE_ONE_OUT_BELOW:
            center = np.nanmedian(matrix, axis=1, keepdims=True)
            spread = MAD_TO_SIGMA * np.nanmedian(np.abs(matrix - center), axis=1, keepdims=True)
            return np.broadcast_to(center, matrix.shape), np.broadcast_to(spread, matrix.shape)
        center = np.full(matrix.shape, np.nan)
        spread = np.full(matrix.shape, np.nan)
        for j in range(matrix.shape[1]):  # fewer than LEAVE_ONE_OUT_BELOW ranks
            others = np.delete(matrix, j, axis=1)
            if others.shape[1] == 0:
                continue
            c = np.nanmedian(others, axis=1)
            center[:, j] = c
            spread[:, j] = MAD_TO_SIGMA * np.nanmedian(np.abs(others - c[:, None]), axis=1)
        return center, spread


@dataclass
class _Excess:
    """Per step x rank matrices (NaN where a rank lacks the step) of both measures."""

    steps: np.ndarray
    ranks: np.ndarray
    values: dict  # column -> matrix (the parts, step_us, work_us and the step's times)
    work_center: np.ndarray
    measures: dict  # "work" / "step" -> {"excess", "pct", "deviations", "flagged", "flagged_by"}


def _excesses(rank_steps: pd.DataFrame) -> _Excess:
    """Each rank's work and step time against the other ranks' per step (the module's
    docstring): excess, percent of the median step, robust deviations and the flags."""
    table = rank_steps.assign(work_us=rank_steps["step_us"] - rank_steps["exposed_comm_us"])
    columns = ["step_us", "work_us", *(p for p, _ in _PARTS), "end_us", "host_start_us", "host_end_us"]
    wide = {c: table.pivot(index="step", columns="rank", values=c) for c in columns}
    values = {c: w.to_numpy(dtype=np.float64, copy=True) for c, w in wide.items()}
    present = ~np.isnan(values["step_us"])
    step_center, _ = _baselines(values["step_us"])
    work_center, _ = _baselines(values["work_us"])
    measures = {}
    with np.errstate(divide="ignore", invalid="ignore"):
        for measure in ("work", "step"):
            center, spread = _baselines(values[f"{measure}_us"])
            excess = values[f"{measure}_us"] - center
            pct = 100 * excess / step_center
            measured = spread > 0
            deviations = np.where(measured, excess / spread, np.nan)
            # the others all equal: any excess is infinitely many deviations for the joint test
            joint_z = np.where(measured, deviations, np.where(excess > 0, np.inf, 0.0))
            both = (pct >= STRAGGLER_MIN_PCT) & (joint_z >= STRAGGLER_MAD_Z)
            far_pct = pct >= STRAGGLER_FAR_PCT
            far_z = measured & (deviations >= STRAGGLER_FAR_MAD_Z) & (pct >= STRAGGLER_FAR_Z_MIN_PCT)
            flagged = present & (excess >= STRAGGLER_MIN_US) & (both | far_pct | far_z)
            measures[measure] = {"excess": excess, "pct": pct, "deviations": deviations, "flagged": flagged,
                                 "flagged_by": np.where(both & measured, "percent and deviations",
                                                        np.where(far_pct, "percent",
                                                                 np.where(both, "percent (others equal)", "deviations")))}
    # a longer step whose work is below the median is a rank that waited longer: a victim
    work_excess = measures["work"]["excess"]
    measures["step"]["flagged"] &= work_excess >= 0
    return _Excess(wide["step_us"].index.to_numpy(), wide["step_us"].columns.to_numpy(), values, work_center,
                   measures)


def _host_range(ex: _Excess, s: int | np.integer[Any], r: int | np.integer[Any], unmarked: Collection[int]) -> str:
    """The ProfilerStep#N host range of step row `s` on rank column `r`, and where the step's
    device work ran past it (into the next step's host range); on a rank in `unmarked` (its
    trace has no ProfilerStep markers, so its one step is the whole trace) it says so instead,
    as no range of that name is in the trace."""
    step = int(ex.steps[s])
    host_start, host_end = ex.values["host_start_us"][s, r], ex.values["host_end_us"][s, r]
    end = ex.values["end_us"][s, r]
    if int(ex.ranks[r]) in unmarked:
        return f"the whole trace (no ProfilerStep markers), {_us(host_start)} to {_us(host_end)} from the trace start"
    text = f"ProfilerStep#{step}, host {_us(host_start)} to {_us(host_end)} from the trace start"
    if end > host_end:
        text += f"; its device work ran on until {_us(end)}"
        later = np.flatnonzero(~np.isnan(ex.values["host_start_us"][s + 1:, r]))
        if len(later) and ex.values["host_start_us"][s + 1 + later[0], r] < end:
            text += f", into ProfilerStep#{int(ex.steps[s + 1 + later[0]])}"
    return text


def _stragglers(rank_steps: pd.DataFrame, ex: _Excess | None, unmarked: Collection[int]) -> pd.DataFrame:
    columns = STRAGGLERS.names
    if not len(rank_steps):
        return pd.DataFrame({c: [] for c in columns})
    assert ex is not None  # made whenever there are rank steps
    work, step = ex.measures["work"], ex.measures["step"]
    flagged = work["flagged"] | step["flagged"]
    # flagged on both: the larger excess is the one reported
    use_step = step["flagged"] & (~work["flagged"] | (step["excess"] > work["excess"]))
    pick = {key: np.where(use_step, step[key], work[key]) for key in ("excess", "pct", "deviations", "flagged_by")}
    part_growth = []
    centers = []
    for column, _ in _PARTS:  # five parts
        center, _ = _baselines(ex.values[column])
        centers.append(center)
        part_growth.append(ex.values[column] - center)
    growth = np.stack(part_growth)  # parts x steps x ranks
    cause_index = np.nanargmax(np.where(np.isnan(growth), -np.inf, growth), axis=0)
    si, ri = np.nonzero(flagged)
    if not len(si):
        return pd.DataFrame({c: [] for c in columns})
    cause_at = cause_index[si, ri]
    worker_of = rank_steps.drop_duplicates("rank").set_index("rank")["worker"]
    values = ex.values
    details = []
    for s, r, c in zip(si, ri, cause_at):  # one line of text per straggling rank-step
        column, _ = _PARTS[c]
        details.append(f"{column[:-3].replace('_', ' ')} {_us(values[column][s, r])} vs "
                       f"median {_us(centers[c][s, r])} (+{_us(growth[c, s, r])}); "
                       f"step {_us(values['step_us'][s, r])}, work {_us(values['work_us'][s, r])} "
                       f"vs median {_us(ex.work_center[s, r])}")
    out = pd.DataFrame({
        "rank": ex.ranks[ri].astype(np.int64),
        "worker": worker_of.reindex(ex.ranks[ri]).to_numpy(),
        "step": ex.steps[si].astype(np.int64),
        "measure": np.where(use_step[si, ri], "step", "work").astype(object),
        "excess_us": pick["excess"][si, ri],
        "excess_pct": pick["pct"][si, ri],
        "deviations": pick["deviations"][si, ri],
        "flagged_by": pick["flagged_by"][si, ri].astype(object),
        "cause": np.array([name for _, name in _PARTS], dtype=object)[cause_at],
        "host_range": [_host_range(ex, s, r, unmarked) for s, r in zip(si, ri)],
        "detail": details,
    })
    return out.sort_values(["excess_us", "step", "rank"], ascending=[False, True, True], kind="stable")


def _us(value: float) -> str:
    """A duration in words: 950 µs, 12.3 ms, 1.20 s."""
    value = float(value)
    if abs(value) >= 1e6:
        return f"{value / 1e6:.2f} s"
    if abs(value) >= 1e3:
        return f"{value / 1e3:.1f} ms"
    return f"{value:.0f} µs"


# Each straggler test in words (a straggler's ``flagged_by`` -> the rule that held); every one
# also needs the excess to be at least `STRAGGLER_MIN_US`.
_RULES = {
    "percent and deviations": f"at least {STRAGGLER_MIN_PCT:g}% of the median step and {STRAGGLER_MAD_Z:g} robust "
                              f"deviations",
    "percent": f"at least {STRAGGLER_FAR_PCT:g}% of the median step",
    "percent (others equal)": f"at least {STRAGGLER_MIN_PCT:g}% of the median step, the other ranks all equal",
    "deviations": f"at least {STRAGGLER_FAR_MAD_Z:g} robust deviations and {STRAGGLER_FAR_Z_MIN_PCT:g}% of the "
                  f"median step",
}
_MEASURES = {"work": "its work (step time minus exposed communication)", "step": "its step time"}


def _sizes(pct: float, deviations: float) -> str:
    """An excess's two sizes in words."""
    spread = "the other ranks do not vary" if deviations != deviations else f"{deviations:.1f} robust deviations"
    return f"+{pct:.1f}% of the median step, {spread}"


def _longer(measure: str, excess_us: float, pct: float) -> str:
    """What took longer than the median rank's, in words."""
    size = f"{_us(excess_us)} (+{pct:.1f}%)"
    return f"it worked {size} longer" if measure == "work" else f"its step took {size} longer"


def _verdict(rank_steps: pd.DataFrame, stragglers: pd.DataFrame, ex: _Excess | None,
             missing: Mapping[str, MissingRank]) -> pd.DataFrame:
    """The `VERDICT` row: one plain sentence, the rule it applied beside it (the very test
    that flagged the rank it names, so that the two cannot disagree), and the ranks covered."""
    n_ranks = int(rank_steps["rank"].nunique())
    n_steps = int(rank_steps["step"].nunique())
    rule = (f"A rank's step is flagged when {_MEASURES['work']} or {_MEASURES['step']} exceeds the median rank's by at least "
            f"{STRAGGLER_MIN_US:g} µs and by {_RULES['percent']}, or {_RULES['deviations']}, or "
            f"{_RULES['percent and deviations']}; tested on {n_steps} steps of {n_ranks} ranks.")
    if n_ranks < 2:
        text = f"{n_ranks} rank: no other rank to compare it with." if n_ranks else "No ranks."
        rule = ""
    elif len(stragglers):
        worst = stragglers.iloc[0]
        text = (f"Rank {int(worst['rank'])} held the job back most: in step {int(worst['step'])} "
                f"{_longer(worst['measure'], worst['excess_us'], worst['excess_pct'])} than the median rank, "
                f"mostly in {worst['cause']}.")
        rule = (f"Flagged because {_MEASURES[worst['measure']]} exceeded the median rank's by at least "
                f"{STRAGGLER_MIN_US:g} µs and {_RULES[worst['flagged_by']]}: it was {_us(worst['excess_us'])} over, "
                f"{_sizes(worst['excess_pct'], worst['deviations'])}. In the trace: {worst['host_range']}. "
                f"{len(stragglers)} straggling rank-steps in all, on {stragglers['rank'].nunique()} of {n_ranks} "
                f"ranks.")
    else:
        assert ex is not None  # made whenever there are rank steps
        text, sizes = _largest_excess(ex)
        rule += sizes
    return VERDICT.frame({"ranks": [n_ranks], "ranks_total": [n_ranks + len(missing)], "steps": [n_steps],
                          "stragglers": [len(stragglers)], "text": [text], "rule": [rule],
                          "coverage": [coverage_text(n_ranks, missing)]})


def _largest_excess(ex: _Excess) -> tuple[str, str]:
    """The verdict's sentence when no rank is flagged, naming the largest excess in percent over
    every rank and step and both measures, and that excess's two sizes for its rule."""
    best = None
    for measure, m in ex.measures.items():  # two measures
        pct = np.where(np.isnan(m["pct"]) | (m["excess"] <= 0), -np.inf, m["pct"])
        if measure == "step":  # a rank that only waited longer is not a candidate
            pct = np.where(ex.measures["work"]["excess"] >= 0, pct, -np.inf)
        if pct.size and np.isfinite(pct.max()) and (best is None or pct.max() > best[0]):
            s, r = np.unravel_index(np.argmax(pct), pct.shape)
            best = (pct.max(), measure, s, r, m)
    if best is None:
        return "No rank held the job back: none took longer than the median rank.", ""
    _, measure, s, r, m = best
    text = (f"No rank held the job back: the largest excess, rank {int(ex.ranks[r])} in step {int(ex.steps[s])}, "
            f"is under the rule ({_longer(measure, m['excess'][s, r], m['pct'][s, r])} than the median rank).")
    return text, f" Largest excess: {_sizes(m['pct'][s, r], m['deviations'][s, r])}."


def _across(parts: Mapping[str, RankPart], workers: list[str], ranks: npt.NDArray[np.int64], attr: str, keys: list[str]) \
        -> pd.DataFrame:
    """Per key, the ranks' totals summarised (min, median, max, spread, slowest rank)."""
    stacked = _stack([getattr(parts[w], attr) for w in workers], keys + ["total_us", "rank"], rank=ranks)
    if not len(stacked):
        return pd.DataFrame({c: [] for c in keys + ["ranks", "min_us", "median_us", "max_us", "spread_pct",
                                                     "slowest_rank"]})
    per_rank = stacked.groupby(keys + ["rank"], sort=False, observed=True)["total_us"].sum().reset_index()
    per_rank = per_rank.sort_values(keys + ["total_us", "rank"], ascending=[True] * len(keys) + [False, True],
                                    kind="stable")
    grouped = per_rank.groupby(keys, sort=False, observed=True)
    out = grouped.agg(ranks=("rank", "nunique"), min_us=("total_us", "min"), median_us=("total_us", "median"),
                      max_us=("total_us", "max"), slowest_rank=("rank", "first")).reset_index()
    with np.errstate(divide="ignore", invalid="ignore"):
        out["spread_pct"] = np.where(out["median_us"] > 0, 100 * (out["max_us"] - out["median_us"]) / out["median_us"],
                                     np.nan)
    return out.sort_values(["spread_pct", "max_us"], ascending=False, kind="stable", na_position="last")


def _matched_calls(parts: Mapping[str, RankPart], workers: list[str], ranks: npt.NDArray[np.int64]) \
        -> pd.DataFrame | None:
    """Every rank's collective calls with the Distributed view's match keys; None when no
    rank has any."""
    if not any(len(parts[w].calls) for w in workers):
        return None
    return match_calls(_stack([parts[w].calls for w in workers], [], worker=workers, rank=ranks,
                              origin_us=[parts[w].origin_us for w in workers]))


def _clocks(workers: list[str], ranks: npt.NDArray[np.int64], calls: pd.DataFrame | None) -> pd.DataFrame:
    """The `CLOCKS` rows of the workers from their `_matched_calls` (None: not aligned)."""
    offsets = np.zeros(len(workers))
    matched = np.zeros(len(workers), dtype=np.int64)
    aligned = np.zeros(len(workers), dtype=bool)
    if len(workers):
        reference = int(np.argmin(ranks))
        aligned[reference] = True
        if calls is not None:
            calls = calls.assign(finish_abs=calls["origin_us"] + calls["finish_us"])
            keys = ["match_by", "match_group", "match_index"]
            ref = calls[calls["worker"] == workers[reference]].drop_duplicates(keys)[keys + ["finish_abs"]]
            joined = calls[calls["worker"] != workers[reference]].merge(ref, on=keys, suffixes=("", "_ref"))
            joined = joined[np.isfinite(joined["finish_abs"] - joined["finish_abs_ref"])]
            diff = (joined["finish_abs_ref"] - joined["finish_abs"]).groupby(joined["worker"]).agg(["median", "size"])
            position = {w: i for i, w in enumerate(workers)}
            at = np.array([position[w] for w in diff.index], dtype=np.int64)  # one per rank
            if len(at):
                offsets[at] = diff["median"].to_numpy()
                matched[at] = diff["size"].to_numpy()
                aligned[at] = True
    return pd.DataFrame({"rank": ranks, "worker": workers, "offset_us": offsets, "matched_calls": matched,
                         "aligned": aligned}).sort_values("rank", kind="stable")


def _collectives(parts: Mapping[str, RankPart], workers: list[str], ranks: npt.NDArray[np.int64], clocks: pd.DataFrame,
                 calls: pd.DataFrame | None) -> pd.DataFrame:
    columns = COLLECTIVES_ACROSS.names
    if calls is None:
        return pd.DataFrame({c: [] for c in columns})
    offset = clocks.set_index("worker")["offset_us"]
    reference_origin = parts[workers[int(np.argmin(ranks))]].origin_us
    calls = calls.assign(arrival_aligned=calls["origin_us"] + calls["arrival_us"]
                         + offset.reindex(calls["worker"]).to_numpy() - reference_origin)
    keys = ["match_by", "match_group", "match_index"]
    ordered = calls.sort_values(keys + ["arrival_aligned", "rank"], kind="stable")
    grouped = ordered.groupby(keys, sort=False)
    out = grouped.agg(name=("name", "first"), ranks=("rank", "nunique"),
                      first_arrival_us=("arrival_aligned", "min"), last_arrival=("arrival_aligned", "max"),
                      first_rank=("rank", "first"), last_rank=("rank", "last"),
                      size_bytes=("message_bytes", "median"), transfer_us=("transfer_us", "min"),
                      bus_factor=("bus_factor", "max"), no_bandwidth_reason=("no_bandwidth_reason", "min")).reset_index()
    out["arrival_spread_us"] = out["last_arrival"] - out["first_arrival_us"]
    with np.errstate(divide="ignore", invalid="ignore"):
        out["algbw_gbps"] = np.where((out["transfer_us"] > 0) & (out["no_bandwidth_reason"] == ""),
                                     out["size_bytes"] / out["transfer_us"] / 1e3, np.nan)
    out["busbw_gbps"] = out["algbw_gbps"] * out["bus_factor"]
    return out.sort_values(["first_arrival_us", "match_group", "match_index"], kind="stable")[columns]


# This view's tab of the page (see `schema.tab`).
JOB_TAB = tab("job", 90, lambda offer: offer.worker_count > 1)


JOB_ROUTE = route(
    "job",
    'Every rank of one run, one span, side by side (Run.job): verdict (ranks loaded, ranks_total, steps, '
    'stragglers; text: one plain sentence, which rank held the job back most and why; rule: the test that'
    " sentence applied, with the rank's sizes; coverage: how many of the span's ranks it covers, naming "
    'each that did not load and why), rank_steps (rank, worker, step, step_us, compute_us, '
    'exposed_comm_us, idle_us, dataloader_us, host_us), stragglers (rank, worker, step, excess_us, cause,'
    ' detail), kernels and operators across ranks (name, [measure,] ranks, min_us, median_us, max_us, '
    'spread_pct, slowest_rank), collectives matched across ranks (name, match_group, match_index, ranks, '
    'first_arrival_us, arrival_spread_us, first_rank, last_rank, size_bytes, transfer_us, algbw_gbps, '
    'busbw_gbps) clocks (rank, worker, offset_us, matched_calls, aligned), missing (worker, rank where '
    'the start of its file gives it, reason: each rank whose trace did not load, left out of the other '
    'tables; the view answers for the others, 422 only when none loads) and health (rank, worker and the '
    "health route's columns: each rank's trace health findings). With table=NAME, that one table (JSON or"
    ' CSV); with tables=A,B, those (JSON).',
    combine, params=(choice("align_clocks", ("true", "false"), "Align the ranks' clocks by the ends of matched collectives "
                            "(default) or compare raw timestamps.", {"true": True, "false": False}),),
    tables={"verdict": VERDICT, "rank_steps": RANK_STEPS, "stragglers": STRAGGLERS, "kernels": KERNELS_ACROSS,
            "operators": OPERATORS_ACROSS, "collectives": COLLECTIVES_ACROSS, "clocks": CLOCKS, "missing": MISSING_RANKS,
            "health": JOB_HEALTH},
    reads=SPAN, part="job")
