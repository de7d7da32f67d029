"""Streams view (scratch: the README's recipe for a tab, done once and reverted)."""

import pandas as pd

from ..schema import declare, documented, route, tab
from ..trace.model import TraceModel

STREAM_SUMMARY = declare(
    "stream_summary", "one CUDA stream of one device",
    ("device", "int64", "", "the device"),
    ("stream", "int64", "", "the stream"),
    ("kernels", "int64", "count", "kernels run on it"),
    ("total_us", "float64", "us", "summed kernel time"),
)


@documented(STREAM_SUMMARY)
def stream_summary(model: TraceModel) -> pd.DataFrame:
    """Kernels and kernel time per device and stream."""
    table = model.kernels.groupby(["device", "stream"], sort=True).agg(
        kernels=("dur", "size"), total_us=("dur", "sum")).reset_index()
    return STREAM_SUMMARY.frame(table)


STREAM_SUMMARY_ROUTE = route("streams", "Kernels and kernel time per device and stream.", stream_summary,
                             table=STREAM_SUMMARY)
STREAMS_TAB = tab("streams", 25, lambda offer: len(offer.model.kernels))
