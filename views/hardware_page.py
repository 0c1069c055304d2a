"""Hardware page: the database as a sortable table, a side-by-side compare and bar charts."""

from __future__ import annotations

import streamlit as st
from pydantic import ValidationError

from dashboard import custom
from dashboard.data import hardware_db
from dashboard.hardware_view import with_device
from dashboard.share import Report, md_escape, share_panel
from dashboard.state import device_picker, devices_param, some_of, warn_bad_params
from roofline.api import hardware_summary
from roofline.datafiles import PROBLEMS, format_validation_error
from roofline.dtypes import COMPUTE_DTYPES, PEAK_FIELDS, peak_unit
from roofline.hardware import Hardware
from roofline.lazy import pandas as pd
from roofline.plots import grouped_bar_figure, memory_compare_figure
from roofline.records import to_toml

COMPARE_KEY, COMPARE_DEFAULT = "compare", ["h100-sxm", "h200-sxm", "mi300x", "b200"]
devices = custom.devices()
device_ids = list(devices)
summaries = {hid: hardware_summary(hw) for hid, hw in devices.items()}
vendors = sorted({hw.vendor for hw in devices.values()})

report = Report()
st.title("Hardware")
st.caption(
    "Dense peaks only: where a datasheet prints only the 2:4-sparsity figure it is halved. "
    "— marks a dtype the part lacks or a figure nobody publishes: unknown, never shown as zero. "
    "1 TB/s = 10¹² B/s. int8 is in TOPS. fp32 is the vector rate; fp32 matrix is a matrix-core rate where the "
    "vendor publishes one. Memory is the vendor's nominal GB; capacity math uses what the runtime exposes where "
    "it is recorded (an 80 GB H100 SXM exposes 79.18 GiB to CUDA), else the nominal GB as 10⁹ B."
)

warn_bad_params({"vendor": some_of(vendors), "compare": devices_param(device_ids)})
if PROBLEMS:
    st.warning(
        f"{len(PROBLEMS)} data file(s) could not be used and were skipped; everything else loaded:\n\n"
        + "\n".join(f"- `{problem}`" for problem in PROBLEMS[:20]),
        icon=":material/warning:",
    )

vendor_filter = st.multiselect("Vendors", vendors, default=vendors, key="vendor", bind="query-params")


def table_row(s: dict) -> dict:
    """One device's row: what a roofline and a model's fit rest on first (memory, bandwidth, the
    bf16 and fp8 peaks, the ridge), so a 1440-px page shows them before it scrolls; then the rest."""
    link = s["interconnect"]
    peaks = {f"{d} {peak_unit(d)}": s["peak_tflops"].get(d) for d in COMPUTE_DTYPES}
    first = [k for k in peaks if k.split()[0] in ("bf16", "fp8")]
    row = {
        "id": s["id"],
        "device": s["name"],
        "memory GB": s["memory_gb"],
        "bandwidth TB/s": s["memory_bandwidth_tbps"],
    }
    row.update({k: peaks[k] for k in first})
    row["bf16 ridge FLOP/B"] = round(s["ridge_intensity"]["bf16"], 1) if "bf16" in s["ridge_intensity"] else None
    row.update({"vendor": s["vendor"], "year": s["launch_year"]})
    row.update({k: v for k, v in peaks.items() if k not in first})
    row["fp32 matrix TFLOPS"] = s["fp32_matrix_tflops"]
    row.update(
        {
            "exposed GiB": round(s["memory_exposed_bytes"] / 2**30, 2) if s["memory_exposed_bytes"] else None,
            "LLC MB": s["l2_cache_mb"],
            "compute units": s["compute_units"],
            "interconnect": link["kind"] if link else None,
            "link GB/s": link["bandwidth_gb_per_s"] if link else None,
            "link figure": ("both directions" if link["bidirectional"] else "per direction") if link else None,
            "topology": link["topology"] if link else None,
            "TDP W": s["tdp_w"],
            "source": next((src["url"] for src in s["sources"] if src.get("url")), None),
        }
    )
    return row


def _figure(key: str, value: object) -> object:
    """A figure of the transposed comparison as the main table shows it ("2,250", not "2250.0")."""
    if key == "year" or isinstance(value, bool) or not isinstance(value, int | float):
        return value
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.2f}".rstrip("0").rstrip(".")


frame = pd.DataFrame([table_row(s) for s in summaries.values() if s["vendor"] in vendor_filter])
report.table(
    frame,
    placeholder="—",
    hide_index=True,
    width="stretch",
    column_config={
        "source": st.column_config.LinkColumn("source", display_text="datasheet"),
        "year": st.column_config.NumberColumn(format="%d"),
        # Every figure with its thousands separator, each column as wide as its widest figure.
        **{
            col: st.column_config.NumberColumn(format="%,.2f" if col in ("exposed GiB", "bandwidth TB/s") else "%,.1f")
            for col in frame.columns
            if col not in ("year",) and pd.api.types.is_numeric_dtype(frame[col])
        },
    },
)
st.download_button(
    "Download the table (CSV)",
    data=lambda: frame.to_csv(index=False),
    file_name="hardware.csv",
    mime="text/csv",
    on_click="ignore",
)

st.header("Your own device")
st.caption(
    "Start from any device and change any figure: the device is then on every page for this session, in this "
    "page's link, and downloadable as a TOML file that `--hardware-dir` reads unchanged. Leave a peak at 0 where "
    "the figure is unknown."
)
current = st.session_state.get(custom.DEVICE_PARAM)
base_ids = list(hardware_db())
base_id = st.selectbox(
    "Start from",
    base_ids,
    index=base_ids.index("h100-sxm"),
    key="cd_base",
    format_func=lambda hid: hardware_db()[hid].name,
)
base = hardware_db()[base_id]
with st.form("custom_device"):
    c1, c2 = st.columns(2)
    new_id = c1.text_input("id (a-z, 0-9, -)", value=f"my-{base.id}", max_chars=60)
    new_name = c2.text_input("name", value=f"My {base.name}", max_chars=120)
    c1, c2, c3, c4 = st.columns(4)
    memory_gb = c1.number_input("memory (GB, nominal)", 0.1, 10_000.0, float(base.memory_gb))
    exposed_gib = c2.number_input(
        "memory the runtime exposes (GiB, 0 = unknown)",
        0.0,
        10_000.0,
        round(base.memory_exposed_bytes / 2**30, 3) if base.memory_exposed_bytes else 0.0,
        format="%.3f",
    )
    bandwidth = c3.number_input(
        "memory bandwidth (TB/s)", 0.001, 1_000.0, float(base.memory_bandwidth_tbps), format="%.3f"
    )
    tdp = c4.number_input("TDP (W, 0 = unknown)", 0.0, 100_000.0, float(base.tdp_w or 0.0))
    st.markdown("Dense peaks (TFLOPS; int8 in TOPS)")
    published = base.peak_tflops.published()
    peaks = {}
    for start in range(0, len(PEAK_FIELDS), 5):  # a row of columns each, so a phone stacks them in order
        for col, field in zip(st.columns(5), PEAK_FIELDS[start : start + 5]):
            label = "fp32 (matrix cores)" if field == "fp32_matrix" else field
            peaks[field] = col.number_input(label, 0.0, 1e6, float(published.get(field, 0.0)), key=f"cd_{field}")
    link = base.interconnect
    c1, c2 = st.columns(2)
    link_gb = c1.number_input(
        "scale-up link (GB/s, as published; 0 = none)", 0.0, 100_000.0, float(link.bandwidth_gb_per_s if link else 0.0)
    )
    link_both = c2.checkbox("that figure adds both directions", value=bool(link and link.bidirectional))
    submitted = st.form_submit_button("Use this device", type="primary")
if submitted:
    record = {
        **base.model_dump(exclude_none=True),
        "id": new_id.strip(),
        "name": new_name.strip(),
        "memory_gb": memory_gb,
        "memory_exposed_bytes": int(exposed_gib * 2**30) if exposed_gib else None,
        "memory_bandwidth_tbps": bandwidth,
        "tdp_w": tdp or None,
        "peak_tflops": {k: v for k, v in peaks.items() if v > 0},
        "notes": f"Your figures, starting from {base.name}.",
        "sources": [{"name": f"your own figures (started from {base.name}; its sources follow)"}]
        + [src.model_dump(exclude_none=True) for src in base.sources],
    }
    if link and link_gb:
        record["interconnect"] = {
            **link.model_dump(exclude_none=True),
            "bandwidth_gb_per_s": link_gb,
            "bidirectional": link_both,
        }
    elif not link_gb:
        record.pop("interconnect", None)
    try:
        device = Hardware.model_validate(record)
    except ValidationError as exc:
        st.error(md_escape(format_validation_error("your device", exc)))
    else:
        problem = custom.name_problem(device, "your device")
        if problem:
            st.error(md_escape(problem))
        else:
            custom.set_custom(custom.DEVICE_PARAM, device)
            st.session_state[COMPARE_KEY] = with_device(
                st.session_state.get(COMPARE_KEY, COMPARE_DEFAULT), device.id, current.id if current else None
            )
            st.rerun()
if current is not None:
    st.success(
        f"In use this session: **{md_escape(current.name)}** (`{current.id}`), {current.memory_bandwidth_tbps:g} TB/s, "
        f"peaks {', '.join(f'{d} {v:g}' for d, v in current.peak_tflops.as_dict().items()) or 'none'}."
    )
    d1, d2 = st.columns(2)
    d1.download_button(
        "Download it as TOML (for --hardware-dir)",
        data=to_toml(current, "A device made on the roofline dashboard's Hardware page."),
        file_name=f"{current.id}.toml",
        mime="application/toml",
        on_click="ignore",
    )
    if d2.button("Remove it"):
        custom.clear_custom(custom.DEVICE_PARAM)
        st.rerun()

st.header("Compare")
chosen = device_picker(device_ids, COMPARE_DEFAULT, label="Devices to compare", key=COMPARE_KEY)
if len(chosen) < 1:
    st.info("Pick two or more devices to compare.")
    st.stop()

compare = pd.DataFrame(
    {summaries[h]["name"]: pd.Series({k: _figure(k, v) for k, v in table_row(summaries[h]).items()}) for h in chosen}
)
compare = compare.drop(index=["device"]).astype(str).replace({"None": "unknown", "nan": "unknown"})
report.table(compare, width="stretch")

left, right = st.columns(2)
dtypes_present = [d for d in COMPUTE_DTYPES if any(d in summaries[h]["peak_tflops"] for h in chosen)]
peak_fig = grouped_bar_figure(
    [d if peak_unit(d) == "TFLOPS" else f"{d} ({peak_unit(d)})" for d in dtypes_present],
    {summaries[h]["name"]: [summaries[h]["peak_tflops"].get(d) for d in dtypes_present] for h in chosen},
    "dense peak (TFLOPS; int8 in TOPS)",
    log_y=True,
    title="Dense peak per dtype (log scale; no dot = not supported or unpublished)",
)
with left:
    report.chart(peak_fig, width="stretch", theme=None, key="peak_chart")
mem_fig = memory_compare_figure(
    [summaries[h]["name"] for h in chosen],
    [summaries[h]["memory_bandwidth_tbps"] for h in chosen],
    [summaries[h]["memory_gb"] for h in chosen],
)
mem_fig.update_layout(title_text="Memory bandwidth and capacity")
with right:
    report.chart(mem_fig, width="stretch", theme=None, key="memory_chart")

report.subheader("Sources")
for h in chosen:
    s = summaries[h]
    links = "; ".join(f"[{src['name']}]({src['url']})" if src.get("url") else src["name"] for src in s["sources"])
    report.markdown(f"**{s['name']}**: {links}" + (f"  \n_{s['notes']}_" if s["notes"] else ""))

share_panel("Hardware", report.sections)
