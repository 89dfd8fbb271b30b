"""The commit-order charts are drawn twice, and this holds the two drawings to the same numbers.

`visualizer/charts.py` draws them in Python for the `show_frame` API (`webapp.app.render_view`: HTML
with no JS); `visualizer/static/live_view.js` draws them in the browser from the live log. Here
Chromium mounts the live view on a saved trace's replay value (no app, no model: the view alone, as
`app.py` loads it), shows chosen frames, and reads back what it drew: the tau_b chart's lines and
dots, the commits chart's bars, and the heatmap's colour at the centre of every cell. Each must equal
what the Python chart draws at the same frame (coordinates to the 0.1 px both print, colours to one
channel step: each side rounds its own blend).
"""

from __future__ import annotations

import base64
import io
import re

import numpy as np
import pytest
from PIL import Image

from visualizer.charts import commits_per_step_svg, entropy_heatmap_svg, tau_over_steps_svg
from visualizer.live_stream import replay_value
from visualizer.replay import example_traces
from visualizer.states import frame_refs
from visualizer.trace import Trace

from tests.browser import CHROMIUM

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine (apt-get install chromium)")]

LIVE_VIEW_JS = "visualizer/static/live_view.js"
# What the view drew, read back from its own elements (the view is `element.dvView`, as mount leaves it).
READ_DRAWN = """() => {
  const v = document.getElementById('host').dvView;
  const attrs = (node, names) => names.map((n) => Number(node.getAttribute(n)));
  const lines = [...v.tauSvg.querySelectorAll('polyline')].map((l) => [l.getAttribute('stroke'),
    l.getAttribute('points').trim().split(/\\s+/).map((p) => p.split(',').map(Number))]);
  const dots = [...v.tauSvg.querySelectorAll('circle')].map((c) => attrs(c, ['cx', 'cy']));
  const bars = [...v.commitSvg.querySelectorAll('rect')].filter((r) => r.getAttribute('fill-opacity') !== '0')
    .map((r) => [r.getAttribute('fill'), ...attrs(r, ['x', 'y', 'width', 'height'])]);
  const g = v.heatGeometry, ctx = v.heat.getContext('2d');
  const heat = [];
  for (let t = 0; t < v.heatSteps.length; t++) {
    const row = [], y = t * g.ch + Math.floor(g.ch / 2);  // a cell's centre: clear of its outline and the cursor
    for (let p = 0; p < v.start.canvas; p++) row.push([...ctx.getImageData(p * g.cw + 1, y, 1, 1).data.slice(0, 3)]);
    heat.push(row);
  }
  return { lines, dots, bars, heat, ch: g.ch, shown: v.stats.shownIndex };
}"""


@pytest.fixture(scope="module")
def view_page():
    """A blank Chromium page with the live view's code loaded, as app.py's js_on_load loads it."""
    from playwright.sync_api import sync_playwright

    from tools.screenshot_app import CHROMIUM_FLAGS

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_content("<div id='host'><div class='dv-live'></div></div>")
            with open(LIVE_VIEW_JS, encoding="utf-8") as f:
                page.add_script_tag(content=f.read())
            yield page
        finally:
            browser.close()


def drawn_at(page, trace: Trace, index: int) -> dict:
    """Mount the view on the trace's replay value, move its slider to `index`, and read what it drew."""
    page.evaluate("""(value) => { const host = document.getElementById('host');
        host.replaceChildren(Object.assign(document.createElement('div'), { className: 'dv-live' }));
        window.dvLiveView.mount(host, { value, palette: 'standard' }, () => {}, () => {}); }""", replay_value(trace))
    page.wait_for_function("() => document.getElementById('host').dvView.stats.shownIndex >= 0", timeout=10_000)
    page.locator("input.dv-replay").fill(str(index + 1))  # the slider counts from 1
    page.wait_for_function(f"() => document.getElementById('host').dvView.stats.shownIndex === {index}", timeout=10_000)
    return page.evaluate(READ_DRAWN)


def python_drawn(trace: Trace, index: int) -> dict:
    """The same elements of the Python charts at frame `index`, parsed out of their SVG."""
    refs = frame_refs(trace)
    block = refs[index].block
    tau = tau_over_steps_svg(trace, block, frame=index, refs=refs)
    lines = [
        [stroke, [[float(v) for v in point.split(",")] for point in points.split()]]
        for points, stroke in re.findall(r'<polyline points="([^"]*)" fill="none" stroke="([^"]*)"', tau)
    ]
    dots = [[float(cx), float(cy)] for cx, cy in re.findall(r'<circle cx="([^"]*)" cy="([^"]*)"', tau)]
    commits = commits_per_step_svg(trace, block, frame=index, refs=refs)
    bars = [
        [fill, float(x), float(y), float(w), float(h)]
        for x, y, w, h, fill, opacity in re.findall(
            r'<rect x="([^"]*)" y="([^"]*)" width="([^"]*)" height="([^"]*)" fill="([^"]*)" fill-opacity="([^"]*)"', commits)
        if opacity != "0"
    ]
    heat_png = re.search(r'href="data:image/png;base64,([^"]*)"', entropy_heatmap_svg(trace, block, frame=index, refs=refs))
    heat = np.asarray(Image.open(io.BytesIO(base64.b64decode(heat_png.group(1)))).convert("RGBA"))
    return {"lines": lines, "dots": dots, "bars": bars, "heat": heat}


def assert_same_shapes(browser: list, python: list, what: str) -> None:
    """The same marks in the same order: equal colours, coordinates within the 0.1 px both print (an exact
    tie such as 116.25 prints as 116.3 in JS, whose toFixed rounds half up, and 116.2 in Python, half to even)."""
    assert len(browser) == len(python), f"{what}: the browser drew {len(browser)}, Python {len(python)}"
    for b, p in zip(browser, python):
        colours_b = [v for v in b if isinstance(v, str)]
        colours_p = [v for v in p if isinstance(v, str)]
        assert colours_b == colours_p, what
        numbers_b = np.array([v for v in b if not isinstance(v, str)], dtype=float)
        numbers_p = np.array([v for v in p if not isinstance(v, str)], dtype=float)
        assert numbers_b.shape == numbers_p.shape and np.allclose(numbers_b, numbers_p, atol=0.1 + 1e-9), (what, b, p)


@pytest.mark.parametrize("name", ["story", "palindrome"])
def test_the_browser_draws_the_charts_the_python_draws(view_page, name):
    trace = Trace.load(next(p for p in example_traces() if p.stem == name))
    refs = frame_refs(trace)
    first_commit = next(i for i, r in enumerate(refs) if r.kind == "commit")
    # a step early in the first block, the block's commit, and a step of the last block
    frames = sorted({2, first_commit, len(refs) - 2})
    for index in frames:
        browser, python = drawn_at(view_page, trace, index), python_drawn(trace, index)
        assert browser["shown"] == index
        assert_same_shapes(browser["lines"], python["lines"], f"{name} frame {index}: tau_b lines")
        assert_same_shapes(browser["dots"], python["dots"], f"{name} frame {index}: tau_b dots")
        assert_same_shapes(browser["bars"], python["bars"], f"{name} frame {index}: commit bars")
        assert browser["ch"] >= 3  # a cell's centre row is then clear of its outline and the cursor (its first and last rows)
        rows = len(browser["heat"])
        assert rows and np.all(python["heat"][rows:, :, 3] == 0)  # rows not reached yet: empty in both
        difference = np.abs(np.array(browser["heat"], dtype=int) - python["heat"][:rows, :, :3].astype(int))
        assert difference.max() <= 1, f"{name} frame {index}: heatmap colours differ by {difference.max()}"
