"""Which trace events are an accelerator's device activity: one table for every backend.

Device activity is what runs on the device's own rows of the trace (its `pid` is the device,
its `tid` the stream or queue, not a host thread) and is launched by a host runtime call that
carries the same `correlation` (`linking`). Each backend names its compute, transfer and sync
activity differently; `BACKENDS` lists those names, as far as public traces and the writers'
sources show them, and the model files each activity by its role:

- compute -> the `kernels` table (Kernel view, GPU summary, operators' device time, Overview's
  Kernel part);
- transfer -> the `memcpy` table (its `bytes` from `Bytes`, or from MTIA's `size`);
- fill -> the `memset` table;
- sync (a device-side wait or event record) -> the `syncs` table, with the event a wait was on
  (`wait_on_stream`, the correlation of the call that recorded it), which the critical path
  follows; a wait is not work, so it counts neither as busy time nor in a breakdown category
  (as HTA leaves `cuda_sync` out of its kernel and idle figures). A sync-like event of a
  category no backend lists stays in `other`.

| backend | runtime calls (host) | device categories | compute | transfer | sync | links by | real trace here |
|---|---|---|---|---|---|---|---|
| CUDA | `cuda_runtime`, `cuda_driver` (2021: `Runtime`) | `kernel`, `gpu_memcpy`, `gpu_memset`, `cuda_sync`, `cuda_event` (2021: `Kernel`, `Memcpy`, `Memset`) | `kernel` | `gpu_memcpy` | `cuda_sync`, `cuda_event` (event records, kineto#1164) | `correlation` | yes |
| ROCm | `cuda_runtime` with HIP names (`hipLaunchKernel`, ...) | as CUDA | `kernel` | `gpu_memcpy` | — | `correlation` | yes (MI250) |
| MTIA | `mtia_runtime` | `mtia_ccp_events` | `pe_exe`, `merge`, `remote`, any other name | `dma_request`, any `dma*` name as HTA (args `direction`, `size`) | `event_record`, `event_wait` | `correlation` | no: hand-written test trace |
| XPU | `xpu_runtime`, `xpu_driver` (`urEnqueueKernelLaunch`, ...) | `kernel`, `gpu_memcpy`, `gpu_memset`, `xpu_sync`, `xpu_scope_profiler` | `kernel` | `gpu_memcpy` | `xpu_sync` | `correlation` | no |
| HPU (Gaudi) | `hpu_op`, and host lanes written as runtime | `kernel` (TPC, MME engines), `gpu_memcpy`, `gpu_memset` | `kernel` | `gpu_memcpy` | — | `enqueue` flows, not `correlation`: device work stays unlinked to operators | no |
| PrivateUse1 | `privateuse1_runtime`, `privateuse1_driver` | `kernel`, `gpu_memcpy`, `gpu_memset` | `kernel` | `gpu_memcpy` | — | `correlation` | no |

A backend's marker rows are no activity of their own and stay in `other`: XPU's scope
profiler (`XpuptiScopeProfilerSession::handleScopeRecord`, pytorch/pytorch
third_party/kineto/libkineto/src/plugin/xpupti/XpuptiScopeProfilerHandlers.cpp at
cd58ff91d0cb4050dedd84f237f5b6861405b3be) writes, for each kernel it measured, a `kernel`
slice named "metrics: <kernel>" 1 ns wider than the kernel on its row (its args the metrics,
no `correlation`) and two `xpu_scope_profiler` counter samples; an `X` event of category
`xpu_scope_profiler` (older writers) is a marker too.

Any other category ending in `_runtime` or `_driver` is a runtime call too. An `X` event of a
category no backend lists is device activity when it runs where a device does (a pid with no
host event: no operator, Python frame, runtime call or allocation) and a runtime call in the
trace carries its `correlation`; its role then comes from its name (`generic_role`: `memcpy`,
`dma` or `copy` transfer, `memset` fill, `sync` or `wait` sync, anything else compute).
Unlinked events of such categories stay in `other`. Sources: Kineto's
`ActivityType` names (`libkineto/include/ActivityType.h`, `src/ActivityType.cpp`), its XPU
plugin, Holistic Trace Analysis 0.5.0 (`hta/common/types.py`: `mtia_ccp_events`, `^dma`
transfers, `runFunction` launches) and the Gaudi PyTorch bridge's trace parser (TPC/MME engines
as kernels, `memcpy*` / `memset*` names, `enqueue` flows).

Blocking runtime calls, by backend, are listed where the views read them
(`views/common.is_blocking_call`).
"""

from typing import NamedTuple

COMPUTE = "compute"
TRANSFER = "transfer"
FILL = "fill"
SYNC = "sync"
# Device rows that record no activity of the device's own (a profiler's metric ranges): kept
# in `other`, never work, whatever their name or correlation.
MARKER = "marker"


class Backend(NamedTuple):
    """One accelerator backend's names (lower-cased categories)."""

    name: str
    runtime_categories: tuple[str, ...]
    device_categories: dict[str, str | None]  # category -> role, or None when the role depends on the name
    transfer_prefixes: tuple[str, ...] = ()  # for categories whose role depends on the name
    sync_names: tuple[str, ...] = ()


# CUDA's names (2021 files: the generic `Runtime`, `Kernel`, ...), which ROCm writes too.
CUDA = Backend("CUDA / ROCm", ("cuda_runtime", "cuda_driver", "runtime", "driver"),
               {"kernel": COMPUTE, "gpu_memcpy": TRANSFER, "memcpy": TRANSFER, "gpu_memset": FILL, "memset": FILL,
                "cuda_sync": SYNC, "cuda_event": SYNC})
BACKENDS = (
    CUDA,
    Backend("MTIA", ("mtia_runtime",), {"mtia_ccp_events": None},
            transfer_prefixes=("dma",), sync_names=("event_record", "event_wait")),
    Backend("XPU", ("xpu_runtime", "xpu_driver"), {"xpu_sync": SYNC, "xpu_scope_profiler": MARKER}),
    Backend("HPU", ("hpu_op",), {}),
    Backend("PrivateUse1", ("privateuse1_runtime", "privateuse1_driver"), {}),
)

RUNTIME_CATEGORIES = frozenset(c for b in BACKENDS for c in b.runtime_categories)
# The name prefix of XPU's scope-profiler slices written under the `kernel` category: markers.
SCOPE_METRICS_PREFIX = "metrics: "
# Backends not listed here name their runtime category `<backend>_runtime` / `_driver`.
RUNTIME_SUFFIXES = ("_runtime", "_driver")
DEVICE_CATEGORY_ROLES = {category: role for b in BACKENDS for category, role in b.device_categories.items()}
# Categories whose events' role is told by their name: category -> (transfer prefixes, sync names).
ROLE_BY_NAME = {category: (b.transfer_prefixes, b.sync_names)
                for b in BACKENDS for category, role in b.device_categories.items() if role is None}


def is_runtime_category(category: str) -> bool:
    """Whether a lower-cased `X` category holds host-side runtime calls."""
    return category in RUNTIME_CATEGORIES or category.endswith(RUNTIME_SUFFIXES)


def device_role(category: str, name: str | None) -> str | None:
    """Role (`COMPUTE`, `TRANSFER`, `FILL`, `SYNC`) of an `X` event of a lower-cased device
    category, None when the category is no device activity. For a category whose role depends
    on the name, a name not listed (or None) is compute."""
    if category in ROLE_BY_NAME:
        transfers, syncs = ROLE_BY_NAME[category]
        name = name or ""
        return TRANSFER if name.startswith(transfers) else SYNC if name in syncs else COMPUTE
    return DEVICE_CATEGORY_ROLES.get(category)


_GENERIC_ROLES = ((TRANSFER, ("memcpy", "dma", "copy")), (FILL, ("memset",)), (SYNC, ("sync", "wait")))


def generic_role(name: str | None) -> str:
    """Role of device activity of a category no backend lists, from its name."""
    lowered = (name or "").lower()
    return next((role for role, words in _GENERIC_ROLES if any(w in lowered for w in words)), COMPUTE)
