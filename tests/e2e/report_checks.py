"""What a report opened from disk must show, in whichever engine opens it: every tab renders,
holds the numbers the Python API gives for the same run, and the Trace view holds the median
step in full detail and says how to see the rest; the page follows the reader's light or dark
theme; names planted in a trace as markup and script show as text.

The checks ask the page through one call, `tab.evaluate(function_source, *args)`: a JavaScript
function (maybe async) called with JSON arguments, whose awaited result comes back as JSON.
Playwright, WebDriver BiDi (Firefox) and classic WebDriver (WebKit) all offer that much, so the
same checks run in Chromium (test_report.py) and in the other engines (test_report_engines.py);
a tab also has `screenshot(path)`. Waits are on the page's ready signal
(`body[data-ready=true]` with a new `data-ready-seq`), polled in the page, never sleeps.
"""

from __future__ import annotations

import re
from typing import Any, Protocol

from .conftest import QUOTED_NAME, SCRIPT_NAME, charts_drawn, format_duration

# Resolves once the page has settled after the action `act` (a function of no argument run
# first): ready, with a ready count other than the one before it.
_AFTER = """async (act, ...args) => {
    const body = document.body;
    const seq = body.dataset.readySeq || '0';
    const changed = await act(...args);
    if (!changed) return;
    const deadline = Date.now() + 60000;
    while (!(body.dataset.ready === 'true' && (body.dataset.readySeq || '0') !== seq)) {
        if (Date.now() > deadline) throw new Error('the page did not settle within 60 s');
        await new Promise((resolve) => setTimeout(resolve, 20));
    }
}"""


class Tab(Protocol):
    def evaluate(self, function: str, *args: Any) -> Any: ...

    def screenshot(self, path) -> None: ...


def after(tab: Tab, action: str, *args: Any) -> None:
    """Run `action` (JavaScript returning whether it changed anything) and wait for the page
    to settle after it."""
    tab.evaluate(f"(...args) => ({_AFTER})({action}, ...args)", *args)


def wait_ready(tab: Tab) -> None:
    """Wait for the page's first ready state; a page that never gets there fails with what
    the engine saw go wrong meanwhile (the errors are what explains a page that never boots)."""
    try:
        tab.evaluate("""async () => {
            const deadline = Date.now() + 60000;
            while (document.body?.dataset.ready !== 'true') {
                if (Date.now() > deadline) throw new Error('the page was not ready within 60 s');
                await new Promise((resolve) => setTimeout(resolve, 20));
            }
        }""")
    except Exception as exc:
        raise AssertionError(f"the page was not ready ({exc}); errors seen: {tab.errors}") from exc


def open_view(tab: Tab, view: str) -> None:
    """Select the tab of `view` (a click) and wait until it has rendered."""
    after(tab, """(view) => {
        const tab = document.querySelector(`[data-view='${view}']`);
        if (!tab) throw new Error(`no tab ${view}`);
        if (tab.getAttribute('aria-selected') === 'true') return false;
        tab.click();
        return true;
    }""", view)


def select_option(tab: Tab, selector: str, value: str) -> None:
    """Choose `value` in the <select> at `selector`, as a user does, and wait until rendered."""
    after(tab, """(selector, value) => {
        const select = document.querySelector(selector);
        select.value = value;
        select.dispatchEvent(new Event('input', {bubbles: true}));
        select.dispatchEvent(new Event('change', {bubbles: true}));
        return true;
    }""", selector, value)


def text(tab: Tab, selector: str) -> str | None:
    """innerText of the first element at `selector`, or None where there is none."""
    return tab.evaluate("(s) => document.querySelector(s)?.innerText ?? null", selector)


def attribute(tab: Tab, selector: str, name: str) -> str | None:
    return tab.evaluate("(s, n) => document.querySelector(s)?.getAttribute(n) ?? null", selector, name)


def kernel_rows(tab: Tab) -> list[tuple[str, str]]:
    """(whole kernel name, row text) of each row of the kernel table: the page shows a short
    form with the full name behind a click (components/KernelName.tsx), or the name itself
    where it has nothing to shorten."""
    return [tuple(row) for row in tab.evaluate("""() => [...document.querySelectorAll('[data-table=kernels] tbody tr')]
        .map((row) => {
            const name = row.querySelector('.kernel-name');
            const toggle = name.querySelector('[data-kernel-name]');
            return [toggle ? toggle.dataset.kernelName : name.innerText, row.innerText];
        })""")]


def check_report_tabs(tab: Tab, profile, screenshot_dir, prefix: str) -> None:
    """Every tab of a report of `profile` (a `Profile` of the run the report holds): rendered
    without a missing answer, screenshot to `screenshot_dir/{prefix}_{view}.png`; the top
    operator and kernel with the API's durations; the Trace view's two levels of detail."""
    wait_ready(tab)
    tabs = tab.evaluate("() => [...document.querySelectorAll('[data-view]')].map((e) => e.dataset.view)")
    assert sorted(tabs) == sorted(v for v in profile.available_views(1, 1) if v != "diff")
    for view in tabs:
        open_view(tab, view)
        shown = text(tab, "main") or text(tab, "body")
        assert "does not hold this answer" not in shown, view
        tab.screenshot(screenshot_dir / f"{prefix}_{view}.png")
    open_view(tab, "overview")
    assert attribute(tab, "[data-control=definitions-link]", "href") is None
    operators = profile.operators()
    key = "device_self_us" if (operators["device_self_us"] > 0).any() else "host_self_us"
    top = operators.loc[operators[key].idxmax()]
    open_view(tab, "operator")
    first = text(tab, "[data-table=operators] tbody tr")
    assert top["name"] in first and format_duration(top[key]) in first, (top["name"], top[key], first)
    kernels = profile.kernels()
    top_kernel = kernels.loc[kernels["total_us"].idxmax()]
    open_view(tab, "kernel")
    name, first = kernel_rows(tab)[0]
    assert name == top_kernel["name"]
    assert format_duration(top_kernel["total_us"]) in first, (top_kernel["total_us"], first)
    # the Trace view: drawn whole; the median step in full detail; another step at that zoom
    # says what the report holds and how to see the rest
    open_view(tab, "trace")
    assert tab.evaluate("() => !!document.querySelector('[data-testid=trace] canvas')")
    # no link leads to a route the file does not hold
    assert attribute(tab, "[data-link=trace-file]", "href") is None
    assert "not in this report" in text(tab, "[data-link=trace-file]")
    steps = sorted(profile.timeline_tracks()["steps"].itertuples(), key=lambda s: (s.end_us - s.start_us, s.step))
    median, other = steps[(len(steps) - 1) // 2], steps[-1]
    for step, held in ((median, True), (other, False)):
        select_option(tab, "[data-control=trace-step]", str(step.step))
        shown = text(tab, "[data-testid=trace]")
        assert ("Cannot load this part of the timeline" in shown) != held, (step.step, shown[:500])
        if not held:
            assert f"step {median.step} in full detail" in shown and "TensorBoard" in shown


def check_diff_page(tab: Tab, view, screenshot_path) -> None:
    """A `compare --html` file of the pair `view` (a `DiffView`) diffs: the Diff tab alone,
    its headline with the API's mean step times and step counts, its causes in the API's
    order; screenshot to `screenshot_path`."""
    wait_ready(tab)
    tabs = tab.evaluate("() => [...document.querySelectorAll('[data-view]')].map((e) => e.dataset.view)")
    assert tabs == ["diff"], tabs
    step = view.explanation.set_index("cause").loc["step_time"]
    headline = text(tab, "[data-testid=diff-headline]")
    assert f"over {step['steps_a']} steps of A" in headline and f"over {step['steps_b']} steps of B" in headline, headline
    assert format_duration(step["mean_us_a"]) in headline and format_duration(step["mean_us_b"]) in headline, headline
    causes = tab.evaluate("() => [...document.querySelectorAll('[data-table=diff-explanation] tbody tr')]"
                          ".map((row) => row.cells[0].innerText)")
    assert causes == list(view.explanation["label"]), causes
    tab.screenshot(screenshot_path)


def check_notebook_frame(frame: Tab, screenshot_path) -> None:
    """What a notebook cell shows of `tb_plugin.show(run, view="operator")` (conftest's
    `notebook_page`), `frame` being the way into its sandboxed frame, which the page around it
    cannot script: the frame's page ready on the Operator tab with operator rows; a click on
    the Memory tab selects it and draws the Memory view's charts; no error seen in the frame.
    Screenshot of the page around it to `screenshot_path`."""
    wait_ready(frame)
    assert attribute(frame, "[data-view='operator']", "aria-selected") == "true"
    assert frame.evaluate("() => document.querySelectorAll('[data-table=operators] tbody tr').length") > 0
    open_view(frame, "memory")
    assert attribute(frame, "[data-view='memory']", "aria-selected") == "true"
    assert frame.evaluate("() => !!document.querySelector('[data-testid=memory]')")
    drawn = charts_drawn(frame)
    assert drawn and min(drawn.values()) >= 2000, f"charts without a picture: {drawn}"
    frame.screenshot(screenshot_path)
    assert not frame.errors, frame.errors


def check_frame_errors_seen(frame: Tab, engine: str) -> None:
    """What goes wrong in a notebook frame (conftest's `broken_notebook_page`, `frame` the way
    into it) reaches the test: the script that throws while the frame's page boots, and a
    `console.error` once it is ready."""
    wait_ready(frame)
    frame.evaluate("() => console.error('planted in the frame')")
    errors = frame.errors
    assert any("planted in the frame" in e for e in errors), f"{engine}: {errors}"
    # (WebKit names an uncaught error of a page from file:// "Script error." only, see engines.py)
    assert any("planted at boot" in e or e.endswith("Script error.") for e in errors), f"{engine}: {errors}"


def _luminance(css_colour: str) -> float:
    """The relative luminance (WCAG 2) of a computed `rgb(...)`/`rgba(...)` colour."""
    channels = [int(c) / 255 for c in re.findall(r"\d+", css_colour)[:3]]
    r, g, b = (c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def check_theme(tab: Tab, color_scheme: str, screenshot_path) -> None:
    """The page follows the reader's `color_scheme` ("light" or "dark"): its background is
    near white (light) or near black (dark), its text the other way round and readable on it
    (WCAG AA contrast, 4.5:1); screenshot to `screenshot_path`."""
    wait_ready(tab)
    background, colour = tab.evaluate("""() => {
        const style = getComputedStyle(document.body);
        return [style.backgroundColor, style.color];
    }""")
    back, fore = _luminance(background), _luminance(colour)
    contrast = (max(back, fore) + 0.05) / (min(back, fore) + 0.05)
    dark = color_scheme == "dark"
    assert (back < 0.1 and fore > back) if dark else (back > 0.9 and fore < back), (color_scheme, background, colour)
    assert contrast >= 4.5, (color_scheme, background, colour, contrast)
    tab.screenshot(screenshot_path)


def check_planted_names(tab: Tab, screenshot_path) -> None:
    """The report of `conftest.planted_trace` shows its names as text: the operators and
    kernels named as markup and script, with quotes, and the name with a byte that is not
    UTF-8 (its replacement character in place); no element came from them. Screenshot of the
    kernels to `screenshot_path`. (That no script ran, no prompt opened, is the tab's to see.)"""
    wait_ready(tab)
    open_view(tab, "operator")
    operators = text(tab, "[data-table=operators]")
    assert SCRIPT_NAME in operators and "bad \ufffd name" in operators, operators
    open_view(tab, "kernel")
    assert sorted(name for name, _ in kernel_rows(tab)) == sorted([SCRIPT_NAME, QUOTED_NAME])
    assert tab.evaluate("() => document.querySelectorAll('body script, body iframe, img[src=x]').length") == 0
    tab.screenshot(screenshot_path)
