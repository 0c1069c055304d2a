"""Your own device and model: TOML files the loaders accept unchanged, and share-link encodings."""

from __future__ import annotations

import base64
import json
import zlib
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from roofline.api import matmul_result
from roofline.datafiles import DataError
from roofline.hardware import Hardware, get_hardware, load_hardware, load_hardware_file
from roofline.hf_config import load_hf_config
from roofline.inference import analyze_step
from roofline.models import ModelConfig, load_model_file
from roofline.records import decode_record, encode_record, to_toml
from roofline.settings import Settings
from roofline.workload import Workload

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = Path(__file__).parent / "data" / "hf_configs"


def my_device() -> Hardware:
    h100 = get_hardware("h100-sxm")
    data = h100.model_dump(exclude_none=True)
    data |= {"id": "my-gpu", "name": "My GPU", "memory_bandwidth_tbps": 4.1, "memory_exposed_bytes": 90_000_000_000}
    data["peak_tflops"] = {**data["peak_tflops"], "bf16": 1200.0}
    data["sources"] = [{"name": "my own figures"}]
    return Hardware.model_validate(data)


def test_a_custom_device_round_trips_through_toml_and_hardware_dir(tmp_path):
    device = my_device()
    (tmp_path / "my-gpu.toml").write_text(to_toml(device, "made in a test"))
    loaded = load_hardware(tmp_path)["my-gpu"]
    assert loaded == device
    # the same numbers on the engine
    ceilings = Settings().ceilings(loaded)
    assert matmul_result(ceilings, 4096, 4096, 4096, "bf16") == matmul_result(
        Settings().ceilings(device), 4096, 4096, 4096, "bf16"
    )
    # and on the command line
    from tests.test_cli import run

    out = run(
        "matmul",
        "--m",
        "1",
        "--n",
        "8192",
        "--k",
        "8192",
        "--hardware",
        "my-gpu",
        "--hardware-dir",
        str(tmp_path),
        "--json",
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["hardware_name"] == "My GPU"


def test_every_shipped_device_and_model_survives_toml(tmp_path):
    for hw in load_hardware().values():
        path = tmp_path / f"{hw.id}.toml"
        path.write_text(to_toml(hw))
        assert load_hardware_file(path) == hw
    model = load_hf_config(CONFIGS / "llama-4-scout.json")
    path = tmp_path / f"{model.id}.toml"
    path.write_text(to_toml(model))
    assert load_model_file(path) == model


def test_share_link_encoding_round_trips_and_is_compact():
    device, model = my_device(), load_hf_config(CONFIGS / "gpt-oss-20b.json")
    assert decode_record(encode_record(device), Hardware, "d") == device
    assert decode_record(encode_record(model), ModelConfig, "m") == model
    # A device record carries its kernel formats (with their sources) too: still well inside a URL.
    assert len(encode_record(device)) < 1500 and len(encode_record(model)) < 800


@pytest.mark.parametrize(
    "text, message",
    [
        ("not-base64!!", "not a record this dashboard wrote"),
        ("x" * 9000, "longer than a record's encoding"),
        (base64.urlsafe_b64encode(zlib.compress(b"[" * 50_000)).decode(), "not a record this dashboard wrote"),
        (base64.urlsafe_b64encode(zlib.compress(b" " * 1_000_000)).decode(), "inflates past"),
        (base64.urlsafe_b64encode(zlib.compress(b'{"id": "x", "memory_gb": NaN}')).decode(), "NaN is not allowed"),
        (base64.urlsafe_b64encode(zlib.compress(b'{"id": "x"}')).decode(), "missing required field"),
    ],
    ids=["not-base64", "too-long", "deep-nesting", "zip-bomb", "nan", "incomplete"],
)
def test_hostile_share_links_are_clean_errors(text, message):
    with pytest.raises(DataError, match=message):
        decode_record(text, Hardware, "link")


def page(path: str, **params) -> AppTest:
    at = AppTest.from_file(str(ROOT / path), default_timeout=60)
    for key, value in params.items():
        at.query_params[key] = value
    return at.run()


def test_a_link_with_a_custom_model_and_device_reproduces_the_llm_view():
    from dashboard.custom import custom_model_record
    from roofline.models import load_models

    # As the page's upload makes it: a custom- id and a "(custom)" name.
    model = custom_model_record(load_hf_config(CONFIGS / "qwen3-30b-a3b.json"), load_models())
    device = my_device()
    at = page(
        "views/llm_page.py", cmodel=encode_record(model), cdevice=encode_record(device), model=model.id, hw=["my-gpu"]
    )
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert not at.info  # the link's record is kept as it is
    # The chart's title is shown above it (bold), where it can wrap on a phone.
    titles = [m.value for m in at.markdown if m.value.startswith("**") and m.value.endswith("**")]
    assert "qwen3-30b-a3b (custom) on My GPU" in titles[0].replace("\\", "")
    expected = analyze_step(Workload(model, "prefill", 1, 1024), device).time_s
    ttft = {m.label: m.value for m in at.metric}["TTFT"]
    assert ttft.startswith(f"{expected * 1e3:.3g}"[:3])


def test_a_link_cannot_pass_its_model_off_as_a_shipped_one():
    """A record with a shipped model's id and name (max_context 2) had replaced Llama 3.1 8B on the
    page under its own name; a device with a shipped id replaces it, as a device file may, and says so."""
    from roofline.models import get_model

    fake = get_model("llama-3.1-8b").model_copy(update={"max_context": 2})
    h100 = get_hardware("h100-sxm").model_copy(update={"memory_bandwidth_tbps": 1.0})
    at = page("views/llm_page.py", cmodel=encode_record(fake), cdevice=encode_record(h100), model="llama-3.1-8b")
    assert not at.exception
    assert at.session_state["cmodel"].id == "custom-llama-3.1-8b"
    assert at.session_state["cmodel"].name == "Llama 3.1 8B (custom)"
    # The link chose that model: the choice follows it to its new id (it had shown the shipped one).
    assert at.selectbox(key="model").value == "custom-llama-3.1-8b" and "custom model" in at.info[0].value
    assert at.session_state["cmodel_text"] == encode_record(at.session_state["cmodel"])  # the link carries it so
    assert any("`h100-sxm` here is your own device" in c.value for c in at.caption)
    # A shipped name under an id of its own, and an id as long as allowed (128 characters): renamed, no traceback.
    mine = fake.model_copy(update={"id": "my-llama"})
    at = page("views/llm_page.py", cmodel=encode_record(mine), model="my-llama")
    assert not at.exception and at.selectbox(key="model").value == "custom-my-llama"
    assert not any("`model`" in w.value for w in at.warning)  # the link's choice had been refused
    long = fake.model_copy(update={"id": "a" * 128})
    at = page("views/llm_page.py", cmodel=encode_record(long), model="a" * 128)
    assert not at.exception and at.session_state["cmodel"].id == "custom-" + "a" * 113


def test_a_bad_custom_link_is_a_warning():
    at = page("views/kv_page.py", cdevice="garbage", cmodel="x" * 9000)
    assert not at.exception
    warnings = " ".join(w.value for w in at.warning)
    assert "`cdevice`" in warnings and "`cmodel`" in warnings
    assert at.get("plotly_chart")


def test_the_hardware_page_form_makes_a_device_for_every_page():
    at = page("views/hardware_page.py")
    at.number_input(key="cd_bf16").set_value(1500.0)
    at.button[0].click()  # the form's submit button
    at.run()
    assert not at.exception
    device = at.session_state["cdevice"]
    assert device.id == "my-h100-sxm" and device.peak_tflops.bf16 == 1500.0
    assert any("In use this session" in s.value for s in at.success)


@pytest.mark.parametrize(("path", "key"), [("views/llm_page.py", "model"), ("views/roofline_page.py", "llm")])
def test_use_this_model_selects_it_under_a_name_that_says_it_is_custom(path, key):
    at = page(path)
    at.text_area(key="cmodel_paste").set_value((CONFIGS / "qwen3-8b.json").read_text()).run()
    at.button(key="cmodel_use").click().run()
    assert not at.exception
    record = at.session_state["cmodel"]
    assert record.id == "custom-qwen3" and record.name == "qwen3 (custom)"
    assert at.selectbox(key=key).value == "custom-qwen3"
    # A name typed in the panel wins, still marked as custom.
    at.text_input(key="cmodel_name").set_value("qwen3-8b").run()
    at.button(key="cmodel_use").click().run()
    assert not at.exception, [e.message for e in at.exception]
    assert at.session_state["cmodel"].id == "custom-qwen3-8b" and at.selectbox(key=key).value == "custom-qwen3-8b"
    # Removing it falls back to the default model with a word, not a traceback.
    at.button(key="cmodel_remove").click().run()
    assert not at.exception, [e.message for e in at.exception]
    assert at.selectbox(key=key).value in ("llama-3.1-8b", "none")


def test_a_custom_model_never_takes_a_shipped_id():
    from dashboard.custom import custom_model_record
    from dashboard.data import model_db

    shipped = model_db()["qwen3-8b"]
    taken = {**model_db(), "custom-qwen3-8b": shipped}
    record = custom_model_record(shipped, taken)
    assert record.id == "custom-qwen3-8b-2" and record.id not in taken and record.name.endswith("(custom)")
