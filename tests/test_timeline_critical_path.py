"""The critical path as the Trace view draws it (`Profile.timeline_critical_path`, route
`timeline_critical_path`): the segments of `critical_path`, each with the timeline track it
lies on. On a hand-made trace the tracks were worked out on paper; on every real GPU trace
each segment's track is the one `timeline_tracks` lists for its thread or stream (matched by
the pid and tid of the events written there, read from the file with the standard library)."""

import csv
import io

import pytest

import tb_plugin
from tb_plugin.views.common import step_windows
from tb_plugin.views.timeline import TIMELINE_CRITICAL_PATH

from .helpers import PREFIX, kernel, make_client, op, raw_events, runtime, wait_ready, write_trace
from .hta_reference import gpu_trace_files

# Main thread tid 2; a helper thread tid 1 of the same process, so its track ("thread 1")
# sorts first. K1 on stream 8 (call 5-8, runs 20-100); K2 on stream 7 (call 10-12) starts at
# 110, 10 µs after K1 ended: an event wait on the other stream. cudaDeviceSynchronize 40-145
# returns after K2 (110-140); aten::item 145-200.
EVENTS = [
    op("ProfilerStep#1", 0, 200, tid=2, cat="user_annotation"), op("aten::mm", 4, 10, tid=2, **{"External id": 1}),
    op("helper", 30, 50, tid=1),
    runtime("cudaLaunchKernel", 5, 3, 1, 1, tid=2), kernel("K1", 20, 80, 1, stream=8),
    runtime("cudaLaunchKernel", 10, 2, 2, 1, tid=2), kernel("K2", 110, 30, 2, stream=7),
    runtime("cudaDeviceSynchronize", 40, 105, 3, 0, tid=2), op("aten::item", 145, 55, tid=2),
]
# Tracks: CPU process first, its threads by name ("thread 1" = 0, "thread 2" = 1), then the
# GPU's streams by number (stream 7 = 2, stream 8 = 3). Backwards from 200: CPU after the
# sync (145-200, main thread), the sync's wait for K2 (140-145), K2 (stream 7), its wait for
# K1 on stream 8 (100-110, drawn on stream 7, the stream that waits), K1 (stream 8), its
# launch (5-20, main thread), CPU before it (0-5).
EXPECTED = [("cpu", 0, 5, 1), ("launch", 5, 20, 1), ("kernel", 20, 100, 3), ("stream_wait", 100, 110, 2),
            ("kernel", 110, 140, 2), ("sync", 140, 145, 1), ("cpu", 145, 200, 1)]


def test_tracks_of_a_hand_made_path(tmp_path):
    profile = tb_plugin.load(write_trace(tmp_path / "w.pt.trace.json", EVENTS))
    tracks = profile.timeline_tracks()["tracks"]
    assert tracks[["kind", "thread"]].values.tolist() == [["thread", "thread 1"], ["thread", "thread 2"],
                                                          ["device", "stream 7"], ["device", "stream 8"]]
    path = profile.timeline_critical_path(1)
    TIMELINE_CRITICAL_PATH.check(path)
    assert [(r["category"], r["start_us"], r["end_us"], r["track"]) for r in path.to_dict("records")] == EXPECTED
    # the same segments as the analysis table, one column more
    assert path.drop(columns="track").equals(profile.critical_path(1))


def test_route_json_csv_and_errors(tmp_path):
    write_trace(tmp_path / "logs" / "run" / "w.pt.trace.json", EVENTS)
    plugin, client = make_client(tmp_path / "logs")
    try:
        plugin.store.wait_for_scan(30)
        assert wait_ready(client, "run=run&worker=w").status_code == 200
        url = f"{PREFIX}/timeline_critical_path?run=run&worker=w"
        body = client.get(url).get_json()  # the first step by default
        assert body["columns"] == TIMELINE_CRITICAL_PATH.names
        at = {name: body["columns"].index(name) for name in ("category", "start_us", "end_us", "track")}
        assert [tuple(row[at[n]] for n in at) for row in body["rows"]] == EXPECTED
        assert client.get(url + "&step=1").get_json() == body
        rows = list(csv.reader(io.StringIO(client.get(url + "&format=csv").get_data(as_text=True))))
        assert rows[0] == body["columns"] and [r[at["track"]] for r in rows[1:]] == [str(e[3]) for e in EXPECTED]
        missing = client.get(url + "&step=9")
        assert missing.status_code == 404 and "steps: 1" in missing.get_json()["reason"]
        assert client.get(url + "&step=x").status_code == 400
    finally:
        plugin.store.stop()


@pytest.fixture(scope="module", params=gpu_trace_files())
def trace(request):
    return request.param


def test_every_segment_lies_on_its_threads_or_streams_track(trace):
    """Every step of every real GPU trace: a CPU segment's track is a thread track whose pid
    and tid are the thread's; a device segment's track is the device track on which the
    file writes that (device, stream)'s kernels, copies and sets."""
    profile = tb_plugin.load(trace)
    tracks = profile.timeline_tracks()["tracks"].set_index("track")
    threads = profile.model.threads
    stream_at = {}  # (device, stream) -> (pid, tid) as written in the file
    for e in raw_events(trace):
        args = e.get("args") or {}
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset") \
                and "stream" in args:
            stream_at.setdefault((int(args.get("device", -1)), int(args["stream"])), (str(e["pid"]), str(e["tid"])))
    for step in step_windows(profile.model)["step"]:
        path = profile.timeline_critical_path(int(step))
        assert (path["track"] >= 0).all()
        for seg in path.to_dict("records"):
            track = tracks.loc[seg["track"]]
            if seg["thread"] >= 0:
                thread = threads.iloc[seg["thread"]]
                assert (track["kind"], track["pid"], track["tid"]) == ("thread", str(thread["pid"]), str(thread["tid"]))
            else:
                assert track["kind"] == "device"
                assert (track["pid"], track["tid"]) == stream_at[(seg["device"], seg["stream"])], seg
