"""Every table of every tab of the sample runs fits a 1,400 px window (issue 35): no table is
wider than the card that holds it. Secondary columns wait behind the table's "more columns"
toggle and long names are shortened with the whole one a click away; the test opens every
tab of every run's first profile (and the memory snapshot tab) in Chromium and measures each
table against its container. Screenshots of each tab land in the e2e screenshot directory."""

from .conftest import api, open_page

WIDTH = 1400


def _profiles(server):
    """(run, worker, span, views) of each sample run's first profile; views is the server's
    list of tabs with data (plus the memory snapshot tab of a run listing snapshots)."""
    out = []
    for run in api(server, "runs")["runs"]:
        if run["workers"]:
            worker = run["workers"][0]
            views = api(server, "views", run=run["name"], worker=worker, span=1)["views"]
            out.append((run["name"], worker, views + (["memory_snapshot"] if run["snapshots"] else [])))
        elif run["snapshots"]:
            out.append((run["name"], "", ["memory_snapshot"]))
    return out


def _overflowing(page):
    """[table id, its width, its container's width] of each table wider than its container."""
    return page.evaluate("""() => [...document.querySelectorAll('[data-table]')].map((t) => {
        const box = t.querySelector('.table-scroll');
        return box && box.scrollWidth > box.clientWidth + 1 ? [t.dataset.table, box.scrollWidth, box.clientWidth] : null;
    }).filter(Boolean)""")


def test_every_table_of_every_tab_fits_a_1400px_window(page, server, screenshot_dir):
    page.set_viewport_size({"width": WIDTH, "height": 1000})
    measured, wide = 0, []
    for run, worker, views in _profiles(server):
        for view in views:
            query = {"run": run, "view": view, **({"worker": worker, "span": 1} if worker else {})}
            open_page(page, server, **query)
            measured += page.locator("[data-table]").count()
            found = _overflowing(page)
            wide += [(run, view, *table) for table in found]
            if found or page.locator("[data-control=more-columns]").count():
                page.screenshot(path=str(screenshot_dir / f"fit_{run}_{view}.png"))
    assert measured > 60
    # and the columns hidden to fit are a click away
    open_page(page, server, run="gpu_h100_compiled", worker="worker0", span=1, view="compiled")
    table = page.locator("[data-table=compiled-kernels]")
    before = table.locator("thead th").count()
    toggle = table.locator("[data-control=more-columns]")
    hidden = int(toggle.get_attribute("data-hidden"))
    assert hidden > 0
    toggle.click()
    assert table.locator("thead th").count() == before + hidden
    assert not wide, "\n".join(f"{r} / {v}: {t} is {w} px wide in {c} px" for r, v, t, w, c in wide)
