"""Streams view (scratch): a hand-made trace, kernels per stream worked out on paper."""

import tb_plugin
from tb_plugin.views.streams import stream_summary

from .helpers import kernel, op, write_trace


def test_kernels_per_stream_on_paper(tmp_path):
    path = write_trace(tmp_path / "w.pt.trace.json", [
        op("ProfilerStep#1", 0, 100, cat="user_annotation"),
        kernel("a", 10, 5, 1, stream=7), kernel("b", 20, 7, 2, stream=7), kernel("c", 30, 11, 3, stream=8)])
    table = stream_summary(tb_plugin.load(path).model)
    assert table[["stream", "kernels", "total_us"]].values.tolist() == [[7, 2, 12.0], [8, 1, 11.0]]
