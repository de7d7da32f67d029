"""What a memory snapshot's stacks tell of an allocation, computed once per model for the
views of `memory_snapshot` (where a library frame is defined): each frame's text and whether
it is library code, each stack's innermost user frame, text and category (`CATEGORY_RULES`),
and the columns every table of allocations shares (pool, category, top frame).
"""

import re
from collections.abc import Hashable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from ..snapshot.model import DEFAULT_POOL_ID, SnapshotModel
from .common import cached

_LIBRARY_FILE = re.compile(r"site-packages/|dist-packages/|(?:^|/)torch/|/lib/python3[.\d]*/")

# Category rules, in the order tried on each stack: the first whose test matches a frame decides.
CATEGORY_RULES = (
    ("optimizer_state", "a frame in torch/optim/",
     lambda f: f["filename"].str.contains("torch/optim/", regex=False)),
    ("backward", "a frame of autograd's backward (torch/autograd/, or a function named *backward*)",
     lambda f: f["filename"].str.contains("torch/autograd/", regex=False) | f["name"].str.contains("backward", regex=False)),
    ("parameter", "a frame that creates or moves module parameters (torch/nn/parameter.py, Module.to/_apply/cuda, "
                  "reset_parameters)",
     lambda f: f["filename"].str.contains("torch/nn/parameter.py", regex=False)
     | (f["filename"].str.contains("torch/nn/modules/module.py", regex=False) & f["name"].isin(["to", "_apply", "cuda"]))
     | f["name"].eq("reset_parameters")),
    ("activation", "a frame of a module's forward (torch/nn/modules/, Module._call_impl, a function named forward)",
     lambda f: f["filename"].str.contains("torch/nn/modules/", regex=False) | f["name"].eq("forward")),
)
UNKNOWN_CATEGORY = ("unknown", "no frame matched a rule (or the allocation has no stack)")


def frame_texts(model: SnapshotModel) -> npt.NDArray[np.object_]:
    """file:line:name of each frame (as `_memory_viz` writes them, with the full path)."""
    return cached(model, "frame_text", lambda: (model.frames["filename"] + ":" + model.frames["line"].astype(str)
                                                   + ":" + model.frames["name"]).to_numpy(dtype=object))


def library_frames(model: SnapshotModel) -> npt.NDArray[np.bool_]:
    return cached(model, "library_frames", lambda: (
        model.frames["filename"].str.contains(_LIBRARY_FILE) | ~model.frames["filename"].str.endswith(".py")).to_numpy())


def top_user_frames(model: SnapshotModel) -> npt.NDArray[np.int64]:
    """Per stack: the frame row of its innermost user frame, else of its innermost frame."""
    def build() -> npt.NDArray[np.int64]:
        sf = model.stack_frames
        n_stacks = int(sf["stack"].max()) + 1 if len(sf) else 0
        library = library_frames(model)[sf["frame"].to_numpy()] if len(sf) else np.empty(0, bool)
        first_user = pd.Series(sf["frame"].to_numpy()[~library]).groupby(sf["stack"].to_numpy()[~library]).first()
        innermost = pd.Series(sf["frame"].to_numpy()).groupby(sf["stack"].to_numpy()).first()
        top = innermost.reindex(range(n_stacks), fill_value=-1)
        top.loc[first_user.index] = first_user
        return np.append(top.to_numpy(dtype=np.int64), -1)  # index -1: no stack -> no frame
    return cached(model, "top_user_frame", build)


def stack_categories(model: SnapshotModel) -> np.ndarray:
    """Per stack (index -1: none) the index into `CATEGORY_RULES` (len = unknown) of its category."""
    def build() -> npt.NDArray[np.int64]:
        sf = model.stack_frames
        n_stacks = int(sf["stack"].max()) + 1 if len(sf) else 0
        category = np.full(n_stacks + 1, len(CATEGORY_RULES), dtype=np.int64)
        for index in reversed(range(len(CATEGORY_RULES))):  # the first rule wins: applied last
            frame_hit = CATEGORY_RULES[index][2](model.frames).to_numpy(dtype=bool)
            stacks: np.ndarray | list[int] = np.unique(sf["stack"].to_numpy()[frame_hit[sf["frame"].to_numpy()]]) if len(sf) else []
            category[stacks] = index
        return category
    return cached(model, "stack_categories", build)


def category_names() -> npt.NDArray[np.object_]:
    return np.array([rule[0] for rule in CATEGORY_RULES] + [UNKNOWN_CATEGORY[0]], dtype=object)


def described_columns(model: SnapshotModel, a: pd.DataFrame | Mapping[Hashable, npt.NDArray[Any]]) -> dict[str, Any]:
    """Columns shared by tables of allocations: pool_id, private_pool, category, top_frame."""
    pools = model.pools["pool_id"].to_numpy(dtype=object)
    pool_id = pools[np.asarray(a["pool"])] if len(pools) else np.array([], dtype=object)
    stack = np.asarray(a["stack"])
    text = np.append(frame_texts(model), "")[top_user_frames(model)[stack]]
    return {"pool_id": pool_id, "private_pool": pool_id != DEFAULT_POOL_ID,
            "category": category_names()[stack_categories(model)[stack]], "top_frame": text}



def stack_texts(model: SnapshotModel) -> dict[Hashable, str]:
    def build() -> dict[Hashable, str]:
        sf = model.stack_frames
        text = frame_texts(model)[sf["frame"].to_numpy()]
        return pd.Series(text).groupby(sf["stack"].to_numpy()).agg(" <- ".join).to_dict()
    return cached(model, "stack_texts", build)
