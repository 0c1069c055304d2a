"""Which measured roofs apply to which device, and why not to the others: one answer for the
command line (``--calibration``, ``--collectives``, ``--json``) and the pages.

A calibration applies to the database device it was measured on. A measured all-reduce applies
to the database device it was measured on, and only when it was run on a GPU with a GPU backend
(NCCL/RCCL): an all-reduce timed with gloo between CPU processes says nothing about an H100's
NVLink (on TP=8 decode it turned 1.52 ms into 134 ms). The user may force it onto every device;
then every figure says so. Nothing is applied in silence, and nothing is dropped in silence.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from roofline.defaults import DEFAULT_COLLECTIVE_LATENCY_S

if TYPE_CHECKING:
    from roofline.calibration import Calibration
    from roofline.measure.schema import Results

GPU_BACKENDS = ("nccl", "rccl")
FORCE_HINT = "--force-collectives"  # the command line's way to force it (the pages have a checkbox)


@dataclass(frozen=True)
class MeasuredRoofs:
    """Measured results chosen by the user, and where each applies."""

    calibration: Calibration | None = None
    calibration_origin: str = ""  # the file (or "this session's run")
    collectives: Results | None = None  # a results file holding an all-reduce
    collectives_origin: str = ""
    force_collectives: bool = False
    force_hint: str = FORCE_HINT

    @property
    def any(self) -> bool:
        return self.calibration is not None or self.collectives is not None

    def collectives_target(self) -> tuple[str | None, str]:
        """(the database device the all-reduce applies to, why it applies to no other). With
        ``force_collectives`` the device is "*" (every one)."""
        results = self.collectives
        if results is None or results.collectives is None:
            return None, ""
        device, coll = results.device, results.collectives
        where = f"{coll.backend} on {device.kind.upper() if device.kind == 'cpu' else device.name}"
        if self.force_collectives:
            return "*", f"measured with {where}; forced onto every device"
        if device.kind != "cuda" or coll.backend.lower() not in GPU_BACKENDS:
            return None, (
                f"measured with {where}, not with a GPU backend ({', '.join(GPU_BACKENDS)}) on a GPU: it says "
                f"nothing about a GPU's link (use {self.force_hint} to apply it anyway)"
            )
        if not device.matched_hardware_id:
            return None, (
                f"measured on {device.name}, which matched no database device (use {self.force_hint} to apply it "
                "anyway)"
            )
        return device.matched_hardware_id, (
            f"an all-reduce applies only to the device it was measured on ({device.matched_hardware_id})"
        )

    def settings_fields(self) -> dict[str, object]:
        """The ``Settings`` fields these results set: the calibration (it picks its own device)
        and the measured link with the one device it applies to (None: every device, forced)."""
        fields: dict[str, object] = {"calibration": self.calibration}
        target, _ = self.collectives_target()
        if target is not None:
            coll = self.collectives.collectives
            fields |= {
                "link_bandwidth_bytes_per_s": coll.link_bandwidth_bytes_per_s,
                "collective_latency_s": min(coll.latency_s, 10.0),
                "link_hardware_id": None if target == "*" else target,
            }
        else:
            fields["collective_latency_s"] = DEFAULT_COLLECTIVE_LATENCY_S
        return fields

    def ranks_note(self, tps: Iterable[int]) -> str:
        """Where the all-reduce was measured over another number of ranks than a TP degree it is
        applied at (``tps``), what carries over and what does not ("" where none differs)."""
        coll = self.collectives.collectives if self.collectives is not None else None
        other = sorted({int(t) for t in tps if t and int(t) > 1 and int(t) != coll.world_size}) if coll else []
        if not other:
            return ""
        at = ", ".join(map(str, other))
        return (
            f"measured over {coll.world_size} ranks, applied at TP {at}: its bus bandwidth carries over where the "
            f"GPUs meet at a switch, not its latency, which grows with the ranks (measure over {other[-1]} ranks "
            "for that TP's own figure)"
        )

    def report(self, device_ids: list[str], tps: Iterable[int] = ()) -> dict[str, object]:
        """What was applied to which of ``device_ids`` and, for the others, why not (JSON); with
        ``tps``, the TP degrees asked for, whether the all-reduce's ranks were theirs."""
        data: dict[str, object] = {}
        cal = self.calibration
        if cal is not None:
            on = [d for d in device_ids if d == cal.hardware_id]
            data["calibration"] = {
                "file": self.calibration_origin,
                "measured_on": cal.device,
                "applies_to": cal.hardware_id,
                "applied_to": on,
                "not_applied_to": [d for d in device_ids if d not in on],
                "why_not": (
                    f"a calibration applies only to the device it was measured on ({cal.hardware_id})"
                    if cal.hardware_id
                    else f"it was measured on {cal.device}, which matched no database device"
                ),
            }
        if self.collectives is not None and self.collectives.collectives is not None:
            target, why = self.collectives_target()
            on = [d for d in device_ids if target == "*" or d == target]
            coll = self.collectives.collectives
            data["collectives"] = {
                "file": self.collectives_origin,
                "measured_on": self.collectives.device.name,
                "device_kind": self.collectives.device.kind,
                "backend": coll.backend,
                "world_size": coll.world_size,
                "forced": self.force_collectives,
                "applies_to": target,
                "applied_to": on,
                "not_applied_to": [d for d in device_ids if d not in on],
                "why_not": why if any(d != target for d in device_ids) and target != "*" else "",
                "note": why,
                "ranks_note": self.ranks_note(tps) if on else "",
            }
        return data

    def lines(self, device_ids: list[str], tps: Iterable[int] = ()) -> list[str]:
        """The report as sentences (the command line's text output and the pages' header)."""
        lines = []
        report = self.report(device_ids, tps)
        for key, what in (("calibration", "calibrated roofs"), ("collectives", "the measured all-reduce")):
            entry = report.get(key)
            if entry is None:
                continue
            source = f" ({entry['file']})" if entry["file"] else ""
            if entry["applied_to"]:
                text = f"{what}{source} applied to {', '.join(entry['applied_to'])}"
                if key == "collectives" and entry["forced"]:
                    text += f" (forced: {entry['note']})"
                if entry.get("ranks_note"):
                    text += f" ({entry['ranks_note']})"
            else:
                text = f"{what}{source} not applied"
            if entry["not_applied_to"]:
                shown = entry["not_applied_to"][:6]
                more = f" and {len(entry['not_applied_to']) - 6} more" if len(entry["not_applied_to"]) > 6 else ""
                reason = entry["why_not"]
                datasheet = "datasheet link" if key == "collectives" else "datasheet roofs"
                text += f"; {datasheet} on {', '.join(shown)}{more}: {reason}"
            lines.append(text[0].upper() + text[1:] + ".")
        return lines
