"""The Memory snapshot page on the sample snapshots (samples/gpu_memory_snapshot): every
rank side by side, the OOM card, the timeline the server draws, hover details, zoom, the
moment chosen by a click, blame, categories, flame graph and allocator state: numbers as the
API gives them, pictures drawn."""

from .conftest import after, api, format_bytes, open_page, row_count, rows, screenshot

RUN = "gpu_memory_snapshot"


def painted(page, selector):
    return page.evaluate("""(sel) => {
        const canvas = document.querySelector(sel);
        const data = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
        let n = 0;
        for (let i = 3; i < data.length; i += 4) if (data[i] > 0) n += 1;
        return n;
    }""", selector)


def test_snapshot_page_shows_the_oom_and_what_holds_memory(page, server, screenshot_dir):
    open_page(page, server, run=RUN, snapshot="rank1")
    assert page.get_attribute("[data-current-view]", "data-current-view") == "memory_snapshot"
    assert not page.query_selector(".status.error")
    # the run list says what the run holds: its snapshots, as the API lists them, and no workers
    listed = next(r for r in api(server, "runs")["runs"] if r["name"] == RUN)
    meta = page.inner_text(f".run-list li[data-run={RUN}] .run-meta")
    assert f"{len(listed['snapshots'])} memory snapshots" in meta and "worker" not in meta
    ranks = rows(api(server, "snapshot_ranks", run=RUN)["ranks"])
    assert row_count(page, "snapshot-ranks") == len(ranks)
    card = rows(api(server, "snapshot_oom", run=RUN, snapshot="rank1"))[0]
    assert card["kind"] == "oom" and page.get_attribute("[data-testid=snapshot-oom]", "data-kind") == "oom"
    text = page.inner_text("[data-testid=snapshot-oom]")
    for value in (card["requested_bytes"], card["device_free_bytes"], card["allocated_bytes"], card["reserved_bytes"]):
        assert format_bytes(value) in text
    assert painted(page, "[data-testid=snapshot-timeline] canvas") > 5000
    blame = rows(api(server, "snapshot_blame", run=RUN, snapshot="rank1", device=0, entry=card["entry"]))
    assert row_count(page, "snapshot-blame") == len(blame)
    assert format_bytes(blame[0]["live_bytes"]) in page.inner_text("[data-table=snapshot-blame]")
    assert row_count(page, "snapshot-categories") == 5
    assert page.query_selector_all("[data-testid=snapshot-flame] .flame-frame")
    screenshot(page, screenshot_dir, "memory_snapshot_oom")


def test_hover_zoom_and_moment(page, server, screenshot_dir):
    open_page(page, server, run=RUN, snapshot="rank0", device=1)
    canvas = page.locator("[data-testid=snapshot-timeline] canvas")
    box = canvas.bounding_box()
    # hover the lowest band in the middle of the trace: its details, from the bands table
    for fraction in (0.5, 0.6, 0.7, 0.8, 0.9):
        page.mouse.move(box["x"] + box["width"] * fraction, box["y"] + box["height"] * 0.9)
        if page.query_selector("[data-testid=snapshot-hover]"):
            break
    assert page.query_selector("[data-testid=snapshot-hover]"), "no band under the pointer"
    bands = rows(api(server, "snapshot_timeline", run=RUN, snapshot="rank0", device=1, bins=1000, bands=60, table="bands"))
    hover = page.inner_text("[data-testid=snapshot-hover]")
    assert any(format_bytes(b["size_bytes"]) in hover for b in bands)
    screenshot(page, screenshot_dir, "memory_snapshot_hover")
    # drag across the middle: the window goes into the URL and the server draws it
    after(page, lambda: (page.mouse.move(box["x"] + box["width"] * 0.3, box["y"] + 50), page.mouse.down(),
                         page.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + 50), page.mouse.up()))
    assert "start_us=" in page.url and "end_us=" in page.url
    assert painted(page, "[data-testid=snapshot-timeline] canvas") > 5000
    # a click chooses the moment: blame follows it
    after(page, lambda: page.mouse.click(box["x"] + box["width"] * 0.6, box["y"] + 50))
    assert "entry=" in page.url
    entry = int(page.url.split("entry=")[1].split("&")[0])
    blame = rows(api(server, "snapshot_blame", run=RUN, snapshot="rank0", device=1, entry=entry))
    assert row_count(page, "snapshot-blame") == len(blame)
    assert f"entry {entry}" in page.inner_text("[data-current-view]")
    screenshot(page, screenshot_dir, "memory_snapshot_zoomed")


def test_beside_the_trace_draws_its_memory_curve(page, tmp_path, screenshot_dir):
    """A run with rank0's Kineto trace and its snapshot recorded at the same time: the trace's
    allocated memory is drawn on the snapshot's time axis, and the peaks compared."""
    import pickle

    from ..helpers import memory, op, write_trace
    from ..snapshot_data import snapshot_of, training
    from .conftest import tensorboard

    a = training(0, seed=5, steps=8)
    times = [e["time_us"] for e in a.entries]
    start, end = times[len(times) // 4], times[-1]
    records = [(start + (end - start) * k // 40, 2_000_000 + 500_000 * (k % 7)) for k in range(41)]
    events = [op("ProfilerStep#1", start - 10, end - start + 20)]
    events += [memory(t, 512, 4096 + i, total, 1 << 30) for i, (t, total) in enumerate(records)]
    run = tmp_path / "logs" / "job"
    write_trace(run / "rank0.pt.trace.json", events)
    (run / "rank0.pickle").write_bytes(pickle.dumps(snapshot_of([a])))
    with tensorboard(tmp_path / "logs", tmp_path / "tb.log") as base:
        open_page(page, base, run="job", worker="rank0", view="memory_snapshot")
        row = rows(api(base, "snapshot_trace", run="job", snapshot="rank0"))[0]
        text = page.inner_text("[data-testid=snapshot-beside-trace]")
        assert format_bytes(row["trace_peak_bytes"]) in text and format_bytes(row["snapshot_peak_bytes"]) in text
        blue = page.evaluate("""() => {
            const c = document.querySelector('[data-testid=snapshot-timeline] canvas');
            const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
            let n = 0;
            for (let i = 0; i < d.length; i += 4) if (d[i + 2] > 200 && d[i] < 60 && d[i + 1] > 60 && d[i + 1] < 150) n += 1;
            return n;
        }""")
        assert blue > 300, "the trace's memory curve is not drawn"
        screenshot(page, screenshot_dir, "memory_snapshot_beside_trace")
        page.goto("about:blank")  # before the server stops: the page's rescan poll would find it gone


def test_an_unreadable_snapshot_is_named_once_and_an_inconsistent_one_has_no_negative_fragmentation(page, tmp_path, screenshot_dir):
    """Run `snaps`: rank0 and rank2 readable, rank1 cut short; run `cut`: its one snapshot cut
    short; run `odd`: one snapshot whose trace has 8 MiB allocated against the 2 MiB its one
    segment reserves (tests/test_memory_snapshot.py). The comparison of `snaps` shows the two
    that read and names rank1 with its reason, as the Job view names a rank that did not load;
    `cut`'s page names its unreadable snapshot once, by its name and never by a server path; the
    inconsistent one gets its reason instead of a fragmentation (-300% otherwise); its tables
    carry their columns' declared meanings; the worker and span selectors say why they are
    empty."""
    import pickle

    from ..snapshot_data import inconsistent_snapshot, snapshot_of, training
    from .conftest import tensorboard

    logs = tmp_path / "logs"
    for run in ("snaps", "cut", "odd"):
        (logs / run).mkdir(parents=True)
    good = pickle.dumps(snapshot_of([training(0, seed=3)]))
    (logs / "snaps" / "rank0.pickle").write_bytes(good)
    (logs / "snaps" / "rank1.pickle").write_bytes(good[: len(good) // 2])
    (logs / "snaps" / "rank2.pickle").write_bytes(good)
    (logs / "cut" / "rank0.pickle").write_bytes(good[: len(good) // 2])
    (logs / "odd" / "rank0.pickle").write_bytes(pickle.dumps(inconsistent_snapshot()))
    with tensorboard(logs, tmp_path / "tb.log") as base:
        open_page(page, base, run="snaps", snapshot="rank1")
        answer = api(base, "snapshot_ranks", run="snaps")
        (missing,), (coverage,) = rows(answer["missing"]), rows(answer["coverage"])
        assert missing["snapshot"] == "rank1" and "truncated" in missing["reason"]
        shown = page.locator("[data-current-view] [data-testid=rank-coverage]")
        assert shown.get_attribute("data-missing") == "1" and shown.inner_text() == coverage["text"]
        assert f"rank1 — {missing['reason']}" in coverage["text"]
        assert row_count(page, "snapshot-ranks") == len(rows(answer["ranks"])) == 2  # rank0's and rank2's device
        assert "rank1" not in page.inner_text("[data-table=snapshot-ranks]")
        assert not page.query_selector_all("[data-current-view] [role=alert]")  # named once, in the comparison
        assert str(tmp_path) not in page.inner_text("body") and ".pickle" not in coverage["text"]
        # rank1, chosen, says it could not be read and offers the first that reads
        assert "“rank1” could not be read (the comparison above says why)" in page.inner_text("[data-testid=memory-snapshot]")
        screenshot(page, screenshot_dir, "memory_snapshot_one_unreadable")
        page.click("[data-testid=memory-snapshot] button[data-snapshot=rank0]:has-text('Show rank0')")
        page.wait_for_selector("[data-control=snapshot]")
        assert page.input_value("[data-control=snapshot]") == "rank0"

        open_page(page, base, run="cut", snapshot="rank0")
        errors = page.query_selector_all("[data-current-view] [role=alert]")
        assert len(errors) == 1
        text = errors[0].inner_text()
        assert "memory snapshot “rank0” of cut" in text and "truncated" in text
        assert str(tmp_path) not in page.inner_text("body") and ".pickle" not in text
        for select in ("worker", "span"):
            assert page.inner_text(f"[data-select={select}]") == "none: memory snapshots only"
        screenshot(page, screenshot_dir, "memory_snapshot_unreadable")

        open_page(page, base, run="odd", view="memory_snapshot")
        card = rows(api(base, "snapshot_oom", run="odd", snapshot="rank0"))[0]
        assert card["fragmentation_pct"] is None and card["anomaly"]
        facts = page.inner_text("[data-testid=snapshot-oom]")
        assert card["anomaly"] in page.inner_text("[data-testid=snapshot-anomaly]") and "%" not in facts
        headers = page.query_selector_all("[data-current-view] th")
        assert headers and all(h.get_attribute("data-definition") for h in headers)
        screenshot(page, screenshot_dir, "memory_snapshot_inconsistent")
        page.goto("about:blank")  # before the server stops: the page's rescan poll would find it gone
    # the browser logs each 422 of an unreadable snapshot (runs snaps and cut): expected here
    page.watch.errors = [e for e in page.watch.errors
                         if not ("status of 422" in e and ("run=snaps" in e or "run=cut" in e))]
