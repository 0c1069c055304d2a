"""Your own model (a Hugging Face config.json) and your own device (the Hardware page's form),
usable on every page for the session and carried in the share link.

Each custom record lives in ``st.session_state`` and in one URL parameter (``cmodel``,
``cdevice``) holding its compact encoding (``roofline.records``), so a link reproduces the view
in a fresh browser. A bad parameter is a visible warning, never a traceback.
"""

from __future__ import annotations

from collections.abc import Collection

import streamlit as st

from dashboard.data import hardware_db, model_db
from dashboard.share import md_escape
from dashboard.state import replace_param
from roofline.datafiles import DataError
from roofline.hardware import Hardware
from roofline.hf_config import MAX_CONFIG_BYTES, SUPPORTED_FAMILIES, parse_hf_config
from roofline.models import ModelConfig
from roofline.records import decode_record, encode_record

MODEL_PARAM, DEVICE_PARAM = "cmodel", "cdevice"
_SELECT = "cmodel_select"  # (widget key, model id) to select on the next run, after "Use this model"
_KINDS = {MODEL_PARAM: (ModelConfig, "custom model"), DEVICE_PARAM: (Hardware, "custom device")}


def name_problem(record: Hardware | ModelConfig, what: str) -> str | None:
    """Why a custom record's name cannot be shown, or None. Pages escape Markdown in names, but
    chart titles and hovers read ``<a href=…>`` as a link, so a name holds no angle brackets."""
    if "<" in record.name or ">" in record.name:
        return f"{what}: the name {record.name[:60]!r} holds < or >, which charts would read as markup"
    return None


def _load_from_url(param: str) -> None:
    """Register the record a link carries (once per distinct encoding), or warn why not."""
    text = st.query_params.get(param)
    if not text or st.session_state.get(f"{param}_text") == text:
        return
    schema, what = _KINDS[param]
    where = f"URL parameter `{param}`"
    shipped = model_db() if param == MODEL_PARAM else {}
    try:
        record = decode_record(text, schema, where)
        problem = name_problem(record, where)
        if problem:
            raise DataError(problem)
        old = record.id
        renamed = old in shipped or record.name in {m.name for m in shipped.values()}
        if renamed:  # never a shipped model's id or name: the link's figures would read as that model's
            record = custom_model_record(record, shipped)
    except DataError as exc:  # the rest of the message quotes the link: shown as text
        st.warning(
            f"{where}{md_escape(str(exc).removeprefix(where))}; the {what} in the link is ignored.",
            icon=":material/warning:",
        )
        del st.query_params[param]
        return
    if renamed:  # the link's choices of it follow it to its new id
        for key in list(st.query_params):
            values = st.query_params.get_all(key)
            if key != param and old in values and record.id != old:
                replace_param(key, [record.id if v == old else v for v in values])
        st.info(f"The model in the link is shown as `{record.id}`, {md_escape(record.name)}: a custom model.")
        text = encode_record(record)
        st.query_params[param] = text
    st.session_state[param] = record
    st.session_state[f"{param}_text"] = text


def _keep_in_url(param: str) -> None:
    record = st.session_state.get(param)
    if record is not None and st.query_params.get(param) != st.session_state.get(f"{param}_text"):
        st.query_params[param] = st.session_state[f"{param}_text"]


def set_custom(param: str, record) -> None:
    st.session_state[param] = record
    st.session_state[f"{param}_text"] = encode_record(record)
    st.query_params[param] = st.session_state[f"{param}_text"]


def clear_custom(param: str) -> None:
    for key in (param, f"{param}_text"):
        st.session_state.pop(key, None)
    if param in st.query_params:
        del st.query_params[param]


def devices() -> dict[str, Hardware]:
    """The database plus the session's own device (which may override a shipped id)."""
    _load_from_url(DEVICE_PARAM)
    _keep_in_url(DEVICE_PARAM)
    custom = st.session_state.get(DEVICE_PARAM)
    if custom is not None and custom.id in hardware_db():  # allowed (a device file may too), and said
        st.caption(f"`{custom.id}` here is your own device, {md_escape(custom.name)}, in place of the database's.")
    return {**hardware_db(), **({custom.id: custom} if custom else {})}


def models() -> dict[str, ModelConfig]:
    """The database plus the session's own model. Call it before the page's widgets: a model
    just chosen with "Use this model" becomes the page's selection here."""
    _load_from_url(MODEL_PARAM)
    _keep_in_url(MODEL_PARAM)
    custom = st.session_state.get(MODEL_PARAM)
    pending = st.session_state.pop(_SELECT, None)
    if custom is not None and pending is not None and pending[1] == custom.id:
        st.session_state[pending[0]] = custom.id
    return {**model_db(), **({custom.id: custom} if custom else {})}


def custom_model_record(record: ModelConfig, taken: Collection[str]) -> ModelConfig:
    """An uploaded model under a name that says it is the user's own: its id starts with
    ``custom-`` and never equals one in ``taken`` (the database's), its name ends "(custom)"."""
    base = (record.id if record.id.startswith("custom-") else f"custom-{record.id}")[:120]  # room for "-2"
    model_id, n = base, 2
    while model_id in taken:
        model_id, n = f"{base}-{n}", n + 1
    name = record.name if record.name.endswith("(custom)") else f"{record.name[:190]} (custom)"
    problem = name_problem(record, "config.json")
    if problem:
        raise DataError(problem)
    return ModelConfig.model_validate(record.model_dump() | {"id": model_id, "name": name})


def model_upload(select_key: str = "model") -> None:
    """A sidebar panel: upload or paste a config.json to analyse your own model on this page;
    "Use this model" selects it in the page's model picker (the widget keyed ``select_key``)."""
    with st.sidebar.expander("Your model (a Hugging Face config.json)"):
        st.caption(
            "Families read: " + ", ".join(SUPPORTED_FAMILIES) + ". Nothing is fetched: the file's fields become a "
            "model record, kept for this session and carried in the page's link."
        )
        uploaded = st.file_uploader(
            f"config.json (up to {MAX_CONFIG_BYTES // 2**20} MB)",
            type=["json"],
            key="cmodel_upload",
            max_upload_size=MAX_CONFIG_BYTES // 2**20,
        )
        pasted = st.text_area("or paste it", key="cmodel_paste", height=100)
        name = st.text_input("Name it", key="cmodel_name", placeholder="my-model", max_chars=100)
        text = uploaded.getvalue() if uploaded is not None else pasted.strip()
        if text and st.button("Use this model", key="cmodel_use"):
            # Named by the user, else by the file (unless it is just "config.json"), else by
            # the file's _name_or_path, else by its family.
            stem = uploaded.name.rsplit(".", 1)[0] if uploaded is not None else ""
            label = name.strip() or (stem if stem.lower() != "config" else "") or None
            origin = uploaded.name if uploaded is not None else "config.json"
            try:
                record = custom_model_record(parse_hf_config(text, origin, name=label), model_db())
            except DataError as exc:
                st.error(md_escape(exc))
            else:
                set_custom(MODEL_PARAM, record)
                st.session_state[_SELECT] = (select_key, record.id)
                st.rerun()
        if st.session_state.get(MODEL_PARAM) is not None:
            current = st.session_state[MODEL_PARAM]
            st.caption(f"In use this session: `{current.id}` ({current.num_layers} layers, {current.attention_kind}).")
            if st.button("Remove it", key="cmodel_remove"):
                clear_custom(MODEL_PARAM)
                st.rerun()
