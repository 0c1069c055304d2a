"""A real browser: load the dashboard, wait for the chart, change an input, see chart and URL change."""

from __future__ import annotations

import re

CHART = '[data-testid="stPlotlyChart"] .js-plotly-plot'


def _chart_state(page) -> str:
    # The plotted data of every trace, as Plotly holds it in the page.
    return page.evaluate(
        "() => JSON.stringify(document.querySelector('.js-plotly-plot').data.map(t => [t.name, t.x, t.y]))"
    )


def _wait_for_chart_titled(page, text: str) -> None:
    # A page can draw several charts, and a fresh session reruns once while the URL settles, so
    # wait until some chart carries the title rather than reading whichever chart came first.
    page.wait_for_function(
        "(text) => [...document.querySelectorAll('.js-plotly-plot')].some("
        "p => ((p.layout && p.layout.title && p.layout.title.text) || '').includes(text))",
        arg=text,
        timeout=60_000,
    )


def test_roofline_page_in_a_browser(app_url, browser):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(app_url + "/")
    page.wait_for_selector(CHART + " .main-svg", timeout=60_000)
    before = _chart_state(page)
    assert "GEMM 4096×4096×4096" in before

    m_input = page.get_by_label("M", exact=True)
    m_input.fill("1")
    m_input.press("Enter")
    page.wait_for_function(
        "() => JSON.stringify(document.querySelector('.js-plotly-plot').data.map(t => t.name)).includes('GEMM 1×4096')",
        timeout=30_000,
    )
    assert re.search(r"[?&]m=1(&|$)", page.url), page.url
    assert _chart_state(page) != before

    # The URL reproduces the view in a fresh tab.
    fresh = browser.new_page()
    fresh.goto(page.url)
    fresh.wait_for_selector(CHART + " .main-svg", timeout=60_000)
    assert "GEMM 1×4096×4096" in _chart_state(fresh)
    fresh.close()
    page.close()


def test_shared_url_with_several_devices(app_url, browser):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(app_url + "/?hw=h100-sxm&hw=mi300x&dtypes=bf16&dtypes=fp8")
    page.wait_for_selector(CHART + " .main-svg", timeout=60_000)
    names = _chart_state(page)
    assert "AMD Instinct MI300X · fp8" in names and "NVIDIA H100 SXM5 80GB · bf16" in names
    page.close()


def test_a_shared_advisor_url_restores_the_same_state(app_url, browser):
    shared = app_url + "/advisor?model=mixtral-8x7b&phase=prefill&batch=4&seq=2048&objective=throughput"
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(shared)
    _wait_for_chart_titled(page, "Mixtral 8x7B prefill: ranked by throughput")
    # The page's own share link carries the same parameters.
    code = page.locator('[data-testid="stCode"]').last.inner_text()
    for part in ("model=mixtral-8x7b", "phase=prefill", "batch=4", "seq=2048", "objective=throughput"):
        assert part in code and part in page.url
    page.close()


def test_a_link_with_a_custom_model_and_device_reproduces_the_view(app_url, browser):
    from pathlib import Path

    from roofline.hardware import Hardware, get_hardware
    from roofline.hf_config import load_hf_config
    from roofline.records import encode_record

    model = load_hf_config(Path(__file__).parent / "data" / "hf_configs" / "gpt-oss-20b.json")
    data = get_hardware("h100-sxm").model_dump(exclude_none=True)
    data |= {"id": "my-gpu", "name": "My GPU", "memory_bandwidth_tbps": 5.0, "sources": [{"name": "mine"}]}
    device = Hardware.model_validate(data)
    link = f"{app_url}/llm?model={model.id}&hw=my-gpu&cmodel={encode_record(model)}&cdevice={encode_record(device)}"
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(link)
    _wait_for_chart_titled(page, "gpt-oss-20b on My GPU")
    # The page's own share link carries both records, so it reproduces the view again.
    code = page.locator('[data-testid="stCode"]').last.inner_text()
    assert "cmodel=" in code and "cdevice=" in code and "model=gpt-oss-20b" in code
    page.close()


def test_a_results_file_uploaded_on_measure_calibrates_the_llm_page(app_url, browser):
    """Upload the shipped H100 results on the Measure page; the same session's LLM page then offers
    them, and choosing them switches the H100 to its calibrated roofs (and says so)."""
    from pathlib import Path

    example = Path(__file__).resolve().parent.parent / "examples" / "h100-sxm-kernel-sweeps.json"
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(app_url + "/measure")
    uploader = page.locator('[data-testid="stMain"] [data-testid="stFileUploader"]')
    uploader.locator('input[type="file"]').set_input_files(str(example))
    page.get_by_text("Calibration: achievable roofs per op class").wait_for(timeout=60_000)
    page.wait_for_selector(CHART + " .main-svg", timeout=60_000)
    # Same session: navigate with the sidebar, not a fresh load.
    page.get_by_role("link", name="LLM inference").click()
    page.wait_for_selector(CHART + " .main-svg", timeout=60_000)
    page.get_by_text("Measured roofs (calibration, all-reduce)").click()
    page.get_by_text("the Measure page's results").click()
    page.get_by_text("Roofs: calibrated roofs").wait_for(timeout=60_000)
    page.close()
