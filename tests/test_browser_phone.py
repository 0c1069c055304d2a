"""On a phone-wide viewport every chart of every page keeps its legend and titles inside it (a
file of its own: the slowest browser test, so a second test worker can run it beside the rest)."""

from __future__ import annotations

from tests.test_browser import _wait_for_plot
from tests.test_page_views import VIEWS

# Every page; a page with several views has each further one opened by clicking its tab (the
# views and their charts' keys as tests/test_page_views.py lists them).
PAGES_390 = ["/", "/?lesson=true", "/llm", "/advisor", "/kv", "/training", "/serving", "/hardware", "/measure"]
TABS_390 = {
    f"/{path.split('/')[1][: -len('_page.py')]}": [
        (view, charts[0]) for view, charts in list(views.items())[1:] if charts
    ]
    for path, views in VIEWS.items()
}

# For every chart: its legend, axis titles and (were one drawn) its Plotly title, as boxes, with the chart's.
CHART_BOXES = """() => [...document.querySelectorAll('.js-plotly-plot')]
  .filter(p => p.data && p.data.length).map(plot => {
    const box = e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
    const all = sel => [...plot.querySelectorAll(sel)].filter(e => e.getBoundingClientRect().width > 0).map(box);
    return {chart: box(plot.querySelector('.main-svg')), legend: all('.legend'), title: all('.gtitle'),
            axis_titles: all('.xtitle, .ytitle, [class^="xtitle"], [class^="ytitle"]'),
            entries: all('.legend .traces'), toolbar: all('.modebar'),
            legend_titles: [...plot.querySelectorAll('.legendtitletext, .legendtitletext tspan.line')]
              .filter(e => !e.querySelector('tspan') && e.textContent.replace(/\u00a0/g, '').trim())
              .filter(e => e.getBoundingClientRect().width > 0).map(box)};
})"""


def _inside(inner, outer, slack=1.0) -> bool:
    return (
        inner[0] >= outer[0] - slack
        and inner[1] >= outer[1] - slack
        and inner[2] <= outer[2] + slack
        and inner[3] <= outer[3] + slack
    )


def _overlap(a, b) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _wait_until_drawn(page, timeout_ms: int = 60_000) -> None:
    """Until the script has stopped running and the number of drawn charts has held still for
    three looks 250 ms apart (a fixed sleep is too long on an idle machine, too short on a busy one)."""
    last, still = -1, 0
    for _ in range(timeout_ms // 250):
        drawn = page.evaluate(
            "() => [...document.querySelectorAll('.js-plotly-plot')].filter(p => p.data && p.data.length).length"
        )
        running = page.locator('[data-testid="stStatusWidgetRunningIcon"]').count()
        still = still + 1 if drawn == last and not running else 0
        if still >= 3:
            return
        last = drawn
        page.wait_for_timeout(250)


def test_at_390_px_no_chart_title_or_legend_is_clipped_or_covered(app_url, browser):
    """On a phone-wide viewport, every chart of every page keeps its legend and titles inside the
    chart, no legend sits on an axis title, and Plotly's toolbar does not cover a legend."""
    checked = 0
    for path in PAGES_390:
        page = browser.new_page(viewport={"width": 390, "height": 3000})
        page.goto(app_url + path)
        if path == "/measure":
            page.get_by_text("H100 SXM kernel sweeps and their calibration").click()
        _wait_for_plot(page)
        for view, chart_key in [("", ""), *TABS_390.get(path, [])]:
            if view:
                page.get_by_role("tab", name=view).click()
                page.wait_for_selector(f".st-key-{chart_key} .js-plotly-plot .main-svg", timeout=60_000)
            _wait_until_drawn(page)
            for i, chart in enumerate(page.evaluate(CHART_BOXES)):
                where = f"{path} {view} chart {i}"
                assert not chart["title"], f"{where}: a Plotly title does not wrap; show it above the chart"
                for legend in chart["legend"]:
                    assert _inside(legend, chart["chart"]), f"{where}: legend {legend} outside {chart['chart']}"
                    for axis in chart["axis_titles"]:
                        assert not _overlap(legend, axis), f"{where}: legend {legend} covers axis title {axis}"
                # Plotly's toolbar shows on hover (on a phone, on a tap) where it is laid out: clear of every
                # legend entry and every line of legend title that holds text (blank ones keep its row).
                for entry in chart["entries"] + chart["legend_titles"]:
                    for toolbar in chart["toolbar"]:
                        assert not _overlap(entry, toolbar), (
                            f"{where}: the toolbar {toolbar} covers legend text {entry}"
                        )
                for axis in chart["axis_titles"]:
                    assert _inside(axis, chart["chart"]), f"{where}: axis title {axis} outside {chart['chart']}"
                checked += 1
        page.close()
    assert checked >= 24
