"""Retake the documentation screenshots in this folder from the bundled samples.

    python frontend/screenshots/take.py        # from the repository root, test extras installed
    python frontend/screenshots/take.py trace  # only the pictures named

Starts a real TensorBoard on `samples/` (the e2e tests' helper: free loopback port, stopped by
its pid) and drives Debian's Chromium at 1280x800, one picture per view, each opened by its
URL (the page keeps its selection there), so the pictures show what a link shows.
"""

import sys
import tempfile
import urllib.parse
from pathlib import Path

from playwright.sync_api import sync_playwright

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from tests.helpers import PREFIX, SAMPLES, tensorboard  # noqa: E402
from tests.e2e.conftest import READY, api, rows  # noqa: E402

GPU = {"run": "gpu_resnet50_v100", "worker": "worker0", "span": 1}
CPU = {"run": "cpu_cnn", "worker": "worker0", "span": 1}
CHROMIUM_ARGS = ["--no-sandbox", "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def trace_with_a_kernel_selected(server):
    """The Trace view zoomed on a convolution kernel of the GPU sample, the kernel selected."""
    found = api(server, "timeline_search", **GPU, q="implicit_convolve_sgemm")["match"]
    pad = max(found["dur_us"] * 40, 200.0)
    return {**GPU, "view": "trace", "trace_event": found["event"],
            "trace_start_us": found["ts_us"] - pad, "trace_end_us": found["ts_us"] + found["dur_us"] + pad}


def views(server):
    """{file name: page query} of every picture but the TensorBoard one."""
    return {
        "overview": {**GPU, "view": "overview"},
        "operator": {**GPU, "view": "operator"},
        "kernel": {**GPU, "view": "kernel"},
        "gpu_idle": {**GPU, "view": "gpu_idle", "idle_by_step": 1},
        "trace": trace_with_a_kernel_selected(server),
        "trace_critical_path": {**GPU, "view": "trace", "trace_path": rows(api(server, "steps", **GPU))[0]["step"]},
        "memory": {**CPU, "view": "memory", "device": "CPU", "start_us": 2000, "end_us": 5000},
        "module": {**CPU, "view": "module"},
        "distributed": {"run": "cpu_ddp_gloo", "worker": "worker0", "span": 1, "view": "distributed"},
        "diff": {**CPU, "view": "diff"},
    }


def main(names):
    with tempfile.TemporaryDirectory() as tmp, tensorboard(SAMPLES, Path(tmp) / "tensorboard.log") as server:
        assert rows(api(server, "timeline_tracks", **GPU)["tracks"])  # the samples are served
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", headless=True, args=CHROMIUM_ARGS)
            try:
                page = browser.new_page(viewport={"width": 1280, "height": 800})
                for name, query in views(server).items():
                    if names and name not in names:
                        continue
                    page.goto(f"{server}{PREFIX}/index.html?{urllib.parse.urlencode(query)}")
                    page.wait_for_selector(READY, state="attached")
                    if name == "trace":
                        page.wait_for_selector("[data-testid=trace-timeline][data-arrows]:not([data-arrows='0'])",
                                               state="attached")
                    if name == "trace_critical_path":
                        page.wait_for_selector("[data-testid=trace-timeline][data-path-arrows-drawn]"
                                               ":not([data-path-arrows-drawn='0'])", state="attached")
                        # the path's tracks (a CPU thread and the stream, at the bottom) in view
                        page.evaluate("() => { const box = document.querySelector('[data-testid=trace-timeline]');"
                                      " box.scrollTop = box.scrollHeight; }")
                        # the canvas repaints on the next animation frame
                        page.evaluate("() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))")
                    page.mouse.move(1, 1)  # no hover tooltip in the picture
                    page.screenshot(path=str(HERE / f"{name}.png"))
                    print(f"{name}.png")
                if names and "tensorboard_dark" not in names:
                    return
                dark = browser.new_page(viewport={"width": 1280, "height": 800}, color_scheme="dark")
                dark.goto(f"{server}/#pytorch_profiler")
                inner = dark.frame_locator("iframe").first.frame_locator("iframe").first
                inner.locator(READY).wait_for(state="attached")
                dark.evaluate("() => document.body.classList.add('dark-mode')")
                inner.locator("html.dark").wait_for(state="attached")
                dark.screenshot(path=str(HERE / "tensorboard_dark.png"))
                print("tensorboard_dark.png")
            finally:
                browser.close()


if __name__ == "__main__":
    main(sys.argv[1:])
