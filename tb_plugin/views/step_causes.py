"""Each step's time split into exclusive causes (`step_causes`), the split the diff explains
(`views.regression`, whose docstring defines each cause) and the Overview's advice reads (how
long the device idles per step while the host launches, synchronises or loads data). Its own
module so that a load and its Overview import neither the diff nor the module tree."""

import pandas as pd

from ..trace.model import TraceModel
from .common import breakdown_categories, cached, is_blocking_call, name_mask, step_windows
from .intervals import exclusive_time

CAUSES = ("device_compute", "memcpy_memset", "communication", "synchronisation", "host_launch", "data_loading", "other")


def step_causes(model: TraceModel) -> pd.DataFrame:
    """Per step: step, then each cause's exclusive time (`<cause>_us`) and total_us; the
    causes sum to total_us, the step's length (the step windows of `Profile.steps`)."""
    def build() -> pd.DataFrame:
        windows = step_windows(model)
        named = {name: (start, end) for name, start, end in breakdown_categories(model)}
        rt = model.runtime
        blocking = name_mask(rt["name"], is_blocking_call)
        rt_start, rt_end = rt["ts"].to_numpy(), (rt["ts"] + rt["dur"]).to_numpy()
        order = [("device_compute", *named["kernel"]),
                 ("memcpy", *named["memcpy"]), ("memset", *named["memset"]),
                 ("communication", *named["communication"]),
                 ("synchronisation", rt_start[blocking], rt_end[blocking]),
                 ("launch", rt_start[~blocking], rt_end[~blocking]),
                 ("data_loading", *named["dataloader"]),
                 ("cpu_exec", *named["cpu_exec"])]
        times = exclusive_time((windows["start_us"], windows["end_us"]), [(s, e) for _, s, e in order])
        by = dict(zip([name for name, _, _ in order] + ["other"], times.T))
        return pd.DataFrame({
            "step": windows["step"].to_numpy(),
            "device_compute_us": by["device_compute"], "memcpy_memset_us": by["memcpy"] + by["memset"],
            "communication_us": by["communication"], "synchronisation_us": by["synchronisation"],
            "host_launch_us": by["launch"] + by["cpu_exec"], "data_loading_us": by["data_loading"],
            "other_us": by["other"], "total_us": (windows["end_us"] - windows["start_us"]).to_numpy()})
    return cached(model, "step_causes", build)
