"""A real browser: load the dashboard, wait for the chart, change an input, see chart and URL change."""

from __future__ import annotations

import json
import re

CHART = '[data-testid="stPlotlyChart"] .js-plotly-plot'


# The first chart that holds data: app.py sends an empty chart first (so a new session loads
# Plotly while the page computes), and on a slow machine it is still there when a test looks.
FIRST_PLOT = "[...document.querySelectorAll('.js-plotly-plot')].find(p => p.data && p.data.length)"


def _wait_for_plot(page, timeout: int = 60_000) -> None:
    page.wait_for_function(
        f"() => {{ const p = {FIRST_PLOT}; return !!(p && p.querySelector('.main-svg')); }}", timeout=timeout
    )


def _wait_until_idle(page, timeout_ms: int = 60_000) -> None:
    """Until the script has not been running for three looks 250 ms apart: a click made while the
    page reruns can be lost when the rerun redraws the widget."""
    still = 0
    for _ in range(timeout_ms // 250):
        still = 0 if page.locator('[data-testid="stStatusWidgetRunningIcon"]').count() else still + 1
        if still >= 3:
            return
        page.wait_for_timeout(250)


def _share_link(page) -> str:
    """The page's share link: it sits in the Share panel's popover, mounted once opened."""
    _wait_until_idle(page)
    page.get_by_role("button", name="Link and offline report").click()
    code = page.locator('[data-testid="stCode"]').last
    code.wait_for(timeout=30_000)
    return code.inner_text()


def _chart_state(page) -> str:
    # The plotted data of every trace, as Plotly holds it in the page.
    return page.evaluate(f"() => JSON.stringify(({FIRST_PLOT}).data.map(t => [t.name, t.x, t.y]))")


def _wait_for_chart_titled(page, text: str) -> None:
    # A chart's title is shown above it as text (it wraps on a phone, where a Plotly title would run
    # off the chart); a fresh session reruns once while the URL settles, so wait for it to appear.
    page.get_by_text(text).first.wait_for(timeout=60_000)
    _wait_for_plot(page)


def test_roofline_page_in_a_browser(app_url, browser):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(app_url + "/")
    _wait_for_plot(page)
    before = _chart_state(page)
    assert "GEMM 4096×4096×4096" in before

    # A value typed while the page still reruns (a fresh session reruns once as its URL settles)
    # can be lost when the rerun redraws the input: type it once the page is idle.
    _wait_until_idle(page)
    m_input = page.get_by_label("M", exact=True)
    m_input.fill("1")
    m_input.press("Enter")
    page.wait_for_function(
        f"() => JSON.stringify(({FIRST_PLOT}).data.map(t => t.name)).includes('GEMM 1×4096')",
        timeout=30_000,
    )
    assert re.search(r"[?&]m=1(&|$)", page.url), page.url
    assert _chart_state(page) != before

    # The URL reproduces the view in a fresh tab.
    fresh = browser.new_page()
    fresh.goto(page.url)
    _wait_for_plot(fresh)
    # A fresh session reruns once while the URL settles: the chart of the linked view may follow
    # a first one drawn before it.
    fresh.wait_for_function(
        f"() => JSON.stringify(({FIRST_PLOT}).data.map(t => t.name)).includes('GEMM 1×4096×4096')",
        timeout=30_000,
    )
    fresh.close()
    page.close()


def test_shared_url_with_several_devices(app_url, browser):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(app_url + "/?hw=h100-sxm&hw=mi300x&dtypes=bf16&dtypes=fp8")
    _wait_for_plot(page)
    # As in a fresh tab above: on a loaded machine the linked view's chart may follow a first one.
    devices = ("NVIDIA H100 SXM5 80GB", "AMD Instinct MI300X")
    wanted = [f"{device} · {dtype}" for device in devices for dtype in ("bf16", "fp8")]
    names_js = f"JSON.stringify(({FIRST_PLOT}).data.map(t => t.name))"
    page.wait_for_function(f"() => {json.dumps(wanted)}.every(n => {names_js}.includes(n))", timeout=30_000)
    names = _chart_state(page)
    assert all(n in names for n in wanted), names[:400]
    page.close()


def test_a_shared_advisor_url_restores_the_same_state(app_url, browser):
    shared = app_url + "/advisor?model=mixtral-8x7b&phase=prefill&batch=4&seq=2048&objective=throughput"
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(shared)
    _wait_for_chart_titled(page, "Mixtral 8x7B prefill: ranked by throughput")
    # The page's own share link carries the same parameters.
    code = _share_link(page)
    for part in ("model=mixtral-8x7b", "phase=prefill", "batch=4", "seq=2048", "objective=throughput"):
        assert part in code and part in page.url
    page.close()


def test_a_link_with_a_custom_model_and_device_reproduces_the_view(app_url, browser):
    from pathlib import Path

    from dashboard.custom import custom_model_record
    from roofline.hardware import Hardware, get_hardware
    from roofline.hf_config import load_hf_config
    from roofline.models import load_models
    from roofline.records import encode_record

    # As the page's upload makes it: a custom- id (a link's shipped id is renamed so).
    model = custom_model_record(
        load_hf_config(Path(__file__).parent / "data" / "hf_configs" / "gpt-oss-20b.json"), load_models()
    )
    data = get_hardware("h100-sxm").model_dump(exclude_none=True)
    data |= {"id": "my-gpu", "name": "My GPU", "memory_bandwidth_tbps": 5.0, "sources": [{"name": "mine"}]}
    device = Hardware.model_validate(data)
    link = f"{app_url}/llm?model={model.id}&hw=my-gpu&cmodel={encode_record(model)}&cdevice={encode_record(device)}"
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(link)
    _wait_for_chart_titled(page, "gpt-oss-20b (custom) on My GPU")
    # The page's own share link carries both records, so it reproduces the view again.
    code = _share_link(page)
    assert "cmodel=" in code and "cdevice=" in code and "model=custom-gpt-oss-20b" in code
    page.close()


def _upload_the_example_results(page):
    """On the Measure page: upload the shipped H100 results and wait for them to show."""
    from pathlib import Path

    example = Path(__file__).resolve().parent.parent / "examples" / "h100-sxm-kernel-sweeps.json"
    uploader = page.locator('[data-testid="stMain"] [data-testid="stFileUploader"]')
    uploader.locator('input[type="file"]').set_input_files(str(example))
    page.get_by_text("Calibration: achievable roofs per op class").wait_for(timeout=60_000)
    return uploader


def test_a_results_file_uploaded_on_measure_calibrates_the_llm_page(app_url, browser):
    """Upload the shipped H100 results on the Measure page; the same session's LLM page then offers
    them, and choosing them switches the H100 to its calibrated roofs (and says so)."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(app_url + "/measure")
    _upload_the_example_results(page)
    _wait_for_plot(page)
    # Same session: navigate with the sidebar, not a fresh load.
    page.get_by_role("link", name="LLM inference").click()
    _wait_for_plot(page)
    _wait_until_idle(page)
    page.get_by_text("Measured roofs (calibration, all-reduce)").click()
    _wait_until_idle(page)
    page.get_by_text("the Measure page's results").click()
    page.get_by_text("Roofs: calibrated roofs").wait_for(timeout=60_000)
    # Back on Measure the results are still there: leaving a page is not removing the file.
    page.get_by_role("link", name="Measure").click()
    page.get_by_text("Calibration: achievable roofs per op class").wait_for(timeout=60_000)
    page.close()


def test_removing_an_uploaded_results_file_removes_its_results(app_url, browser):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(app_url + "/measure")
    uploader = _upload_the_example_results(page)
    uploader.get_by_role("button", name="Remove h100-sxm-kernel-sweeps.json").click()
    page.get_by_text("Results live in this session only").wait_for(timeout=60_000)
    # The rerun that follows the removal clears the results; until it ends the old ones stay drawn.
    page.get_by_text("Calibration: achievable roofs per op class").wait_for(state="detached", timeout=60_000)
    page.close()


def test_the_offline_report_opens_without_a_network_and_has_the_headline_numbers(app_url, browser, tmp_path):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(app_url + "/llm?batch=8&view=Where+the+time+goes")
    _wait_for_plot(page)
    # The headline's six figures, once the run that drew them (after the URL settled) has ended.
    _wait_until_idle(page)
    page.wait_for_function(
        "() => document.querySelectorAll('[data-testid=\"stMetricValue\"]').length === 6", timeout=60_000
    )
    _wait_until_idle(page)
    shown = page.locator('[data-testid="stMetricValue"]').all_inner_texts()
    assert len(shown) == 6
    page.get_by_role("button", name="Link and offline report").click()
    with page.expect_download(timeout=60_000) as download:
        page.get_by_role("button", name="Download an offline HTML report").click()
    report = tmp_path / "report.html"
    download.value.save_as(report)
    page.close()

    offline = browser.new_context(viewport={"width": 1200, "height": 1000})
    offline.set_offline(True)
    view = offline.new_page()
    view.goto(report.as_uri())
    view.wait_for_selector(".js-plotly-plot .main-svg", timeout=30_000)  # plotly.js is inline
    text = view.inner_text("body")
    for label, value in zip(["TTFT", "TPOT", "End to end", "Output tokens/s", "MFU", "Memory / device"], shown):
        assert label in text and value in text, (label, value)
    # The report holds what the page shows: the headline and the open view, not the closed ones.
    assert view.locator("h2", has_text="Where the time goes").count() == 1
    assert view.locator("h2", has_text="Op table").count() == 0
    assert "compute-bound" in text and "True" not in text
    offline.close()


def test_each_tab_is_titled_by_its_page_and_roofline_has_its_own_address(app_url, browser):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    for path, title in (("/roofline", "Roofline · roofline"), ("/llm", "LLM inference · roofline")):
        page.goto(app_url + path)
        _wait_for_plot(page)
        page.wait_for_function("(t) => document.title === t", arg=title, timeout=30_000)
        assert page.get_by_text("Page not found").count() == 0
    page.close()


def test_a_trace_uploaded_on_the_serving_page_is_simulated_as_it_arrived(app_url, browser, tmp_path):
    trace = tmp_path / "BurstGPT_1.csv"
    trace.write_text(
        "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
        "5,ChatGPT,472,18,490,Conversation log\n45,ChatGPT,1087,230,1317,Conversation log\n"
        "118,GPT-4,417,276,693,Conversation log\n120,GPT-4,300,0,300,API log\n"
    )
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{app_url}/serving?hw=h100-sxm&view=Under+load&load_kind=trace")
    page.get_by_text("Upload a trace to simulate its requests").wait_for(timeout=60_000)
    uploader = page.locator('[data-testid="stFileUploader"]').filter(has_text="Trace of requests")
    uploader.locator('input[type="file"]').set_input_files(str(trace))
    page.get_by_text("TTFT of each request at the trace BurstGPT_1.csv").first.wait_for(timeout=90_000)
    page.get_by_text("3 of 3 requests in").first.wait_for(timeout=30_000)
    page.close()


def test_a_bad_trace_upload_is_one_error_naming_the_file_as_it_is(app_url, browser, tmp_path):
    bad = tmp_path / "*em*_[x](y).csv"
    bad.write_text("Timestamp,Request tokens,Response tokens\n")
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{app_url}/serving?hw=h100-sxm&view=Under+load&load_kind=trace")
    page.get_by_text("Upload a trace to simulate its requests").wait_for(timeout=60_000)
    uploader = page.locator('[data-testid="stFileUploader"]').filter(has_text="Trace of requests")
    uploader.locator('input[type="file"]').set_input_files(str(bad))
    error = page.locator('[data-testid="stAlertContentError"]').filter(has_text="has no requests")
    error.wait_for(timeout=60_000)
    assert "trace: *em*_[x](y).csv has no requests" in error.inner_text()
    page.close()


def test_the_serving_point_a_user_picks_is_in_the_link_and_the_link_reopens_it(app_url, browser):
    """The One point tab's device and decode batch reach the link (they had not: a link reopened the
    first device at its middle batch)."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(app_url + "/serving?view=One+point&hw=h100-sxm&hw=h200-sxm")
    _wait_for_plot(page)
    _wait_until_idle(page)
    page.locator('[data-testid="stSelectbox"]').filter(has_text="Device").last.click()
    page.get_by_role("option", name="h200-sxm").first.click()
    page.wait_for_function("() => location.search.includes('pick_hw=h200-sxm')", timeout=60_000)
    _wait_until_idle(page)
    # A key pressed while the page reruns can be lost with the redrawn slider: press until the link moves.
    for _ in range(5):
        thumb = page.locator("[data-testid=stSlider] input[type=range]").last
        thumb.focus()
        thumb.press("ArrowRight")
        try:
            page.wait_for_function("() => location.search.includes('pick_batch_h200-sxm=')", timeout=10_000)
            break
        except Exception:  # playwright's TimeoutError: try the key again
            _wait_until_idle(page)
    _wait_until_idle(page)
    tiles = lambda p: p.locator('[data-testid="stMetric"]').all_inner_texts()[:3]  # noqa: E731
    picked, link = tiles(page), _share_link(page)
    assert "pick_hw=h200-sxm" in link and "pick_batch_h200-sxm=" in link
    again = browser.new_page(viewport={"width": 1400, "height": 1000})
    again.goto(link)
    _wait_for_plot(again)
    _wait_until_idle(again)
    assert tiles(again) == picked
    page.close()
    again.close()
