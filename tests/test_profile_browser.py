"""The Profile page in a real browser: upload a trace, see its ops on the roofline, and the roofs
chosen in the URL."""

from __future__ import annotations

import json

from tests.test_profile_trace import gpu_trace

CHART = '[data-testid="stPlotlyChart"] .js-plotly-plot'


def test_an_uploaded_trace_goes_on_the_roofline(app_url, browser, tmp_path):
    trace = tmp_path / "rank0.json"
    trace.write_text(json.dumps(gpu_trace()))
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(app_url + "/profile?proofs=h200-sxm")
    uploader = page.locator('[data-testid="stMain"] [data-testid="stFileUploader"]')
    uploader.locator('input[type="file"]').set_input_files(str(trace))
    page.get_by_text("Profiled aten ops on NVIDIA H200 SXM 141GB's roofs").wait_for(timeout=60_000)
    # Past app.py's empty warm-up chart: a chart that holds data.
    page.wait_for_function(
        "() => [...document.querySelectorAll('.js-plotly-plot')]"
        ".some(p => p.data && p.data.length && p.querySelector('.main-svg'))",
        timeout=60_000,
    )
    page.get_by_text("What would move it").first.wait_for(timeout=30_000)
    names = page.evaluate(
        "() => [...document.querySelectorAll('.js-plotly-plot')].flatMap(p => (p.data || []).map(t => t.name))"
    )
    assert "aten ops" in names
    assert "proofs=h200-sxm" in page.url  # not the default (the trace names an H100): kept in the link
    page.close()
