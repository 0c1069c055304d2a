"""Serving: latency against throughput, the best setup under TTFT and TPOT targets, what it costs,
and the serving techniques that move it, each a step on the roofline.

Continuous batching with chunked prefill, in steady state: B sequences decode together, and each
step also processes a chunk of new prompts' tokens so that prefills keep pace with the requests
that finish: c = B x prompt / output tokens per step. One such mixed step reads every weight
once for B + c rows (the point of chunking), attends B decode queries over their caches and c
prompt tokens over the prompt so far (half of it on average). Then

    TPOT = T(B, c),  tokens/s per group = B / T(B, c),  tokens/s per user = 1 / TPOT,

and a new prompt's first token comes after ceil(prompt / (budget - B)) steps of T(B, budget - B)
(``budget``: the engine's max batched tokens per step). Without chunking, prefills run as their
own steps and every running sequence waits for them: TPOT = T_decode(B) + (B / output) x
T_prefill, TTFT = T_prefill. Queueing is not modelled: these are the times of a loaded server at
steady state, the p50 of a well-provisioned one.

Speculative decoding verifies k drafted tokens per sequence in one target step of B(k + 1)
rows that reads the cache once; with acceptance rate a the step yields (1 - a^(k+1)) / (1 - a)
tokens on average. At small batch the verify step costs about what a decode step does (memory
bound) and decoding speeds up; at large batch it turns compute-bound and costs ~(k + 1) steps,
and speculation slows decoding down.

Disaggregation runs prefill and decode on separate pools: decode steps never carry a prefill,
and each prompt's KV cache crosses a link to the decode pool.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from roofline.datafiles import DataError, DataRecord, format_validation_error, read_data_file
from roofline.engine import REGIMES, Op, evaluate, evaluate_devices
from roofline.format import fmt_seconds
from roofline.hardware import Hardware, Source
from roofline.memory import footprint, kv_bytes_per_token_per_layer
from roofline.models import ModelConfig
from roofline.ops import step_ops
from roofline.settings import Settings
from roofline.workload import Precision, Workload, check_positive_int

SHIPPED_PRICES = Path(__file__).resolve().parent.parent / "prices_db" / "prices.toml"
DEFAULT_BATCHES = np.unique(np.round(np.geomspace(1, 4096, 40)).astype(int))


# ---- prices ------------------------------------------------------------------------------------
class Price(DataRecord):
    """An editable default: one device-hour's on-demand price, where it was read and when."""

    device: str
    usd_per_hour: float
    provider: str
    source: Source
    as_of: str

    def model_post_init(self, __context) -> None:
        if not 1e-6 <= self.usd_per_hour <= 1e6:
            raise ValueError(f"usd_per_hour must be in [1e-06, 1e+06], got {self.usd_per_hour!r}")


def load_prices(path: Path = SHIPPED_PRICES) -> dict[str, Price]:
    data = read_data_file(path)
    try:
        prices = [Price.model_validate(entry) for entry in data.get("price", [])]
    except (ValueError, TypeError) as exc:
        if hasattr(exc, "errors"):
            raise DataError(format_validation_error(path, exc)) from None
        raise DataError(f"{path}: {exc}") from None
    return {p.device: p for p in prices}


def parse_price(text: str) -> tuple[str, float]:
    """``ID=USD`` from the command line."""
    device, _, value = text.partition("=")
    try:
        usd = float(value)
    except ValueError:
        raise ValueError(f"--price: expected DEVICE=USD_PER_HOUR, got {text[:60]!r}") from None
    if not device or not np.isfinite(usd) or not 0 < usd <= 1e6:
        raise ValueError(f"--price: expected DEVICE=USD_PER_HOUR with a price in (0, 1e6], got {text[:60]!r}")
    return device, usd


# ---- traffic -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Traffic:
    """The shape of the requests: prompt and output tokens (the mean of each)."""

    prompt_len: int = 1024
    output_len: int = 256

    def __post_init__(self) -> None:
        check_positive_int(self.prompt_len, "prompt_len", 1 << 24)
        check_positive_int(self.output_len, "output_len", 1 << 24)

    @property
    def mean_context(self) -> float:
        """The cache a decoding sequence holds on average: the prompt and half the output."""
        return self.prompt_len + self.output_len / 2


# ---- the steps -----------------------------------------------------------------------------------
def _is_attention(op: Op) -> bool:
    return op.meta.get("kind") == "attention" or op.name.startswith("MLA ")


def mixed_step_ops(w: Workload, batch, chunk, prompt_len: int) -> list[Op]:
    """One continuous-batching step: ``batch`` decoding sequences (at ``w.seq_len`` cached) and
    ``chunk`` tokens of new prompts of ``prompt_len`` tokens. Linear layers and elementwise ops
    see batch + chunk rows (weights read once); decode attention reads each sequence's cache;
    the chunk attends over the prompt so far (half of it on average); the LM head runs for the
    decoding sequences."""
    b = np.asarray(batch, float)
    c = np.asarray(chunk, float) * np.ones_like(b)
    rows = replace(w, phase="decode", batch=b + c)
    shared = [op for op in step_ops(rows) if not _is_attention(op) and op.group != "logits"]
    decode = step_ops(replace(w, phase="decode", batch=b))
    ops = shared + [op for op in decode if _is_attention(op) or op.group == "logits"]
    if np.any(c > 0):
        ops += _chunk_attention(w, c, prompt_len)
    return [replace(op, phase="decode") for op in ops]


def _chunk_attention(w: Workload, chunk: np.ndarray, prompt_len: int) -> list[Op]:
    """Attention of ``chunk`` prompt tokens: the whole prompt's prefill attention scaled to the
    chunk's share, plus reading the prompt's cache so far (half of it on average) per chunk."""
    prompt = replace(w, phase="prefill", batch=1, seq_len=prompt_len, output_len=1)
    share = chunk / prompt_len
    per_layer_kv = kv_bytes_per_token_per_layer(w.model, w.precision, w.tp)
    out = []
    for op in step_ops(prompt):
        if not _is_attention(op):
            continue
        scaled = replace(
            op,
            name=f"{op.name}, prefill chunk",
            flops=op.flops * share,
            act_bytes=op.act_bytes * share,
            kv_bytes=op.kv_bytes * share + (prompt_len / 2) * per_layer_kv * (chunk > 0),
            weight_bytes=op.weight_bytes * share,
        )
        out.append(scaled)
    return out


def verify_step_ops(w: Workload, batch, k: int) -> list[Op]:
    """Speculative decoding's verify step: ``k`` drafted tokens and one more per sequence, through
    the target model in one step. Linear layers see batch x (k + 1) rows; attention scores k + 1
    queries per sequence against a cache read once; logits for every verified position."""
    b = np.asarray(batch, float)
    rows = replace(w, phase="decode", batch=b * (k + 1))
    ops = [op for op in step_ops(rows) if not _is_attention(op)]
    for op in step_ops(replace(w, phase="decode", batch=b)):
        if _is_attention(op):
            ops.append(replace(op, flops=op.flops * (k + 1), act_bytes=op.act_bytes * (k + 1)))
    return ops


def expected_accepted(alpha: float, k: int) -> float:
    """Tokens a verify step yields on average: (1 - a^(k+1)) / (1 - a) (Leviathan et al. 2023)."""
    if not 0 <= alpha <= 1:
        raise ValueError(f"acceptance rate must be in [0, 1], got {alpha!r}")
    if alpha == 1:
        return float(k + 1)
    return (1 - alpha ** (k + 1)) / (1 - alpha)


# ---- the sweep over batch on many devices ------------------------------------------------------------
@dataclass(frozen=True)
class ServingPoints:
    """A batch sweep on several devices at one TP and precision; arrays are (devices, batches)."""

    model: str
    devices: list[str]
    tp: int
    precision: Precision
    traffic: Traffic
    chunked: bool
    batch: np.ndarray
    tpot_s: np.ndarray
    ttft_s: np.ndarray
    tokens_per_s: np.ndarray  # output tokens per second of the TP group
    fits: np.ndarray
    memory_bytes: np.ndarray
    capacity_bytes: np.ndarray  # per device
    bound: np.ndarray  # the regime that decides the step
    mfu: np.ndarray
    mbu: np.ndarray
    prefill_share: np.ndarray  # of the step's time, spent on prompts
    usd_per_hour: np.ndarray  # per device (NaN: no price set)
    tdp_w: np.ndarray  # per device (NaN: unknown)
    why_not: dict[str, str] = field(default_factory=dict)  # devices that cannot run it

    @property
    def per_device(self) -> np.ndarray:
        return self.tokens_per_s / self.tp

    @property
    def per_user(self) -> np.ndarray:
        return 1.0 / self.tpot_s

    def usd_per_million(self) -> dict[str, np.ndarray]:
        """Cost per million output tokens, input tokens, and all tokens."""
        per_s = (self.usd_per_hour[:, None] * self.tp) / 3600.0
        out_rate = self.tokens_per_s
        in_rate = out_rate * self.traffic.prompt_len / self.traffic.output_len
        with np.errstate(divide="ignore", invalid="ignore"):
            return {
                "output": per_s * (1 - self.prefill_share) / out_rate * 1e6,
                "input": per_s * self.prefill_share / in_rate * 1e6,
                "all": per_s / (out_rate + in_rate) * 1e6,
            }

    def tokens_per_joule(self) -> np.ndarray:
        return self.tokens_per_s / (self.tdp_w[:, None] * self.tp)

    def frontier(self) -> np.ndarray:
        """Points no other fitting point of the same device beats on both tokens/s per device and
        per user (the latency-throughput frontier)."""
        x, y = self.per_device, self.per_user
        ok = self.fits & np.isfinite(x) & np.isfinite(y)
        better = (x[:, None, :] >= x[:, :, None]) & (y[:, None, :] >= y[:, :, None])
        strictly = (x[:, None, :] > x[:, :, None]) | (y[:, None, :] > y[:, :, None])
        dominated = np.any(better & strictly & ok[:, None, :], axis=2)
        return ok & ~dominated

    def row(self, d: int, j: int) -> dict[str, object]:
        """One point as the command line's JSON and the page's hovers give it."""
        cost = {k: float(v[d, j]) for k, v in self.usd_per_million().items()}
        return {
            "hardware": self.devices[d],
            "tp": self.tp,
            "batch": int(self.batch[j]),
            "ttft_s": float(self.ttft_s[d, j]),
            "tpot_s": float(self.tpot_s[d, j]),
            "tokens_per_s": float(self.tokens_per_s[d, j]),
            "tokens_per_s_per_device": float(self.per_device[d, j]),
            "tokens_per_s_per_user": float(self.per_user[d, j]),
            "fits": bool(self.fits[d, j]),
            "memory_bytes": float(self.memory_bytes[d, j]),
            "bound": str(self.bound[d, j]),
            "mfu": float(self.mfu[d, j]),
            "mbu": float(self.mbu[d, j]),
            "usd_per_million_output": _finite_or_none(cost["output"]),
            "usd_per_million_input": _finite_or_none(cost["input"]),
            "usd_per_million_tokens": _finite_or_none(cost["all"]),
            "tokens_per_joule": _finite_or_none(float(self.tokens_per_joule()[d, j])),
        }


def _finite_or_none(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def serving_sweep(
    model: ModelConfig,
    devices: list[Hardware],
    traffic: Traffic,
    precision: Precision | None = None,
    tp: int = 1,
    settings: Settings | None = None,
    prices: dict[str, float] | None = None,
    batches: np.ndarray = DEFAULT_BATCHES,
    chunked: bool = True,
) -> ServingPoints:
    """Every device at every batch: TPOT, TTFT, throughput, memory, regime, cost (one vectorised
    evaluation of the mixed step over all devices and batches)."""
    settings = settings or Settings()
    precision = precision or Precision()
    prices = prices or {}
    batch = np.asarray(batches, float)
    if traffic.prompt_len + traffic.output_len - 1 > model.max_context:
        raise ValueError(
            f"prompt + output: {traffic.prompt_len + traffic.output_len - 1:,} tokens exceed {model.name}'s "
            f"maximum context of {model.max_context:,}"
        )
    w = Workload(model, "decode", batch, int(round(traffic.mean_context)), precision=precision, tp=tp, cuda_graphs=True)
    runnable, why_not = [], {}
    for hw in devices:
        try:
            run, _ = w.on(hw)
            if tp > 1 and hw.group_link(tp)[0] is None:
                raise ValueError(f"TP={tp}: {hw.group_link(tp)[1]}")
        except ValueError as exc:
            why_not[hw.id] = str(exc)
            continue
        runnable.append((hw, run))
    shape = (len(devices), batch.size)
    nan = np.full(shape, np.nan)
    out = {k: nan.copy() for k in ("tpot", "ttft", "mfu", "mbu", "share", "memory")}
    fits = np.zeros(shape, bool)
    bound = np.full(shape, "", dtype=object)
    capacity = np.full(len(devices), np.nan)
    index = {hw.id: i for i, hw in enumerate(devices)}
    # Devices of one precision share their ops: one evaluation for the group.
    groups: dict[Precision, list[tuple[Hardware, Workload]]] = {}
    for hw, run in runnable:
        groups.setdefault(run.precision, []).append((hw, run))
    budget = settings.max_batched_tokens
    for members in groups.values():
        run = members[0][1]
        ceilings = [settings.ceilings(hw, tp, cuda_graphs=True) for hw, _ in members]
        rows = [index[hw.id] for hw, _ in members]
        chunk = batch * traffic.prompt_len / traffic.output_len
        if chunked:
            ops = mixed_step_ops(run, batch, chunk, traffic.prompt_len)
            step, by_regime = evaluate_devices(ops, ceilings)
            plain, _ = evaluate_devices(mixed_step_ops(run, batch, 0.0, traffic.prompt_len), ceilings)
            first = np.clip(budget - batch, 1, traffic.prompt_len)
            burst, _ = evaluate_devices(mixed_step_ops(run, batch, first, traffic.prompt_len), ceilings)
            ttft = np.ceil(traffic.prompt_len / first) * burst
            tpot = step
            share = np.clip(1 - plain / step, 0, 1)
        else:
            ops = step_ops(run)
            plain, by_regime = evaluate_devices(ops, ceilings)
            prefill = replace(run, phase="prefill", batch=1, seq_len=traffic.prompt_len)
            pre, _ = evaluate_devices(step_ops(prefill), ceilings)
            pre = np.asarray(pre, float).reshape(len(members), 1)
            ttft = np.broadcast_to(pre, plain.shape)
            tpot = plain + batch / traffic.output_len * pre
            share = np.clip(1 - plain / tpot, 0, 1)
            step = tpot
        flops = sum(np.asarray(op.flops, float) * op.count for op in ops) * np.ones_like(batch)
        moved = sum(np.asarray(op.bytes, float) * op.count for op in ops) * np.ones_like(batch)
        for k, (hw, member) in enumerate(members):
            i = rows[k]
            out["tpot"][i], out["ttft"][i], out["share"][i] = tpot[k], ttft[k], share[k]
            peak = hw.peak_flops_per_s(member.precision.act_dtype)
            out["mfu"][i] = flops / step[k] / peak
            out["mbu"][i] = moved / step[k] / hw.memory_bandwidth_bytes_per_s
            bound[i] = np.array(REGIMES)[by_regime[:, k].argmax(axis=0)]
            request = replace(
                member, phase="request", batch=batch, seq_len=traffic.prompt_len, output_len=traffic.output_len
            )
            fp = footprint(request, hw, settings, with_smallest_tp=False)
            fits[i] = np.broadcast_to(fp.fits, batch.shape)
            out["memory"][i] = np.broadcast_to(fp.total_bytes, batch.shape)
            capacity[i] = fp.capacity_bytes
    return ServingPoints(
        model=model.id,
        devices=[hw.id for hw in devices],
        tp=tp,
        precision=precision,
        traffic=traffic,
        chunked=chunked,
        batch=batch.astype(int),
        tpot_s=out["tpot"],
        ttft_s=out["ttft"],
        tokens_per_s=batch / out["tpot"],
        fits=fits,
        memory_bytes=out["memory"],
        capacity_bytes=capacity,
        bound=bound,
        mfu=out["mfu"],
        mbu=out["mbu"],
        prefill_share=out["share"],
        usd_per_hour=np.array([prices.get(hw.id, np.nan) for hw in devices], float),
        tdp_w=np.array([hw.tdp_w or np.nan for hw in devices], float),
        why_not=why_not,
    )


# ---- targets -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Best:
    """A device's best setup under the targets (or why none meets them)."""

    hardware: str
    meets: bool
    point: dict[str, object] | None
    weight_dtype: str | None
    kv_dtype: str | None
    binding: str  # what stops it doing better: the step's regime, memory capacity, or the targets

    def to_json(self) -> dict[str, object]:
        return {
            "hardware": self.hardware,
            "meets_targets": self.meets,
            "weight_dtype": self.weight_dtype,
            "kv_dtype": self.kv_dtype,
            "binding": self.binding,
            **(self.point or {}),
        }


DEFAULT_PRECISIONS: tuple[tuple[str, str], ...] = (("bf16", "bf16"), ("bf16", "fp8"), ("fp8", "fp8"))


def best_under_targets(
    model: ModelConfig,
    devices: list[Hardware],
    traffic: Traffic,
    ttft_s: float,
    tpot_s: float,
    settings: Settings | None = None,
    prices: dict[str, float] | None = None,
    tps: tuple[int, ...] = (1, 2, 4, 8),
    precisions: tuple[tuple[str, str], ...] = DEFAULT_PRECISIONS,
) -> list[Best]:
    """Per device, the setup (TP, batch, weight and KV dtype) meeting TTFT and TPOT that costs
    least per million output tokens (where priced; else that gives the most tokens/s per
    device), ranked by that."""
    for name, value in (("TTFT target", ttft_s), ("TPOT target", tpot_s)):
        if not (isinstance(value, int | float) and np.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")
    prices = prices or {}
    best: dict[str, tuple[float, dict, str, str]] = {}
    near: dict[str, tuple[str, float]] = {}  # the closest miss: what binds
    for tp in tps:
        for wdtype, kvdtype in precisions:
            precision = Precision(weight_dtype=wdtype, act_dtype="bf16", kv_dtype=kvdtype)
            pts = serving_sweep(model, devices, traffic, precision, tp, settings, prices)
            cost = pts.usd_per_million()["output"]
            meets = pts.fits & (pts.ttft_s <= ttft_s) & (pts.tpot_s <= tpot_s)
            for d, hw_id in enumerate(pts.devices):
                if np.any(meets[d]):
                    score = np.where(
                        meets[d], np.nan_to_num(cost[d], nan=0.0) if hw_id in prices else -pts.per_device[d], np.inf
                    )
                    j = int(np.argmin(score))
                    if hw_id not in best or score[j] < best[hw_id][0]:
                        best[hw_id] = (float(score[j]), pts.row(d, j), wdtype, kvdtype)
                elif hw_id not in best:
                    near[hw_id] = _what_binds(pts, d, ttft_s, tpot_s, near.get(hw_id))
    out = []
    for hw in devices:
        if hw.id in best:
            _, row, wdtype, kvdtype = best[hw.id]
            out.append(Best(hw.id, True, row, wdtype, kvdtype, row["bound"]))
        else:
            reason = near.get(hw.id, ("it cannot run this model", np.inf))[0]
            out.append(Best(hw.id, False, None, None, None, reason))
    priced = [b for b in out if b.meets and b.point.get("usd_per_million_output") is not None]
    unpriced = [b for b in out if b.meets and b.point.get("usd_per_million_output") is None]
    missing = [b for b in out if not b.meets]
    priced.sort(key=lambda b: b.point["usd_per_million_output"])
    unpriced.sort(key=lambda b: -b.point["tokens_per_s_per_device"])
    return priced + unpriced + missing


def _what_binds(pts: ServingPoints, d: int, ttft_s: float, tpot_s: float, previous) -> tuple[str, float]:
    """Why no batch of this device meets the targets, and how far the nearest miss is."""
    if pts.devices[d] in pts.why_not:
        reason, gap = pts.why_not[pts.devices[d]], np.inf
    elif not np.any(pts.fits[d]):
        reason, gap = f"memory capacity: the model does not fit at TP={pts.tp}", np.inf
    else:
        fit = pts.fits[d]
        tpot_best = np.nanmin(np.where(fit, pts.tpot_s[d], np.inf))
        ttft_best = np.nanmin(np.where(fit, pts.ttft_s[d], np.inf))
        j = int(np.nanargmin(np.where(fit, pts.tpot_s[d], np.inf)))
        if tpot_best > tpot_s:
            reason = f"TPOT: {fmt_seconds(tpot_best)} at best ({pts.bound[d, j]}-bound at batch {pts.batch[j]})"
            gap = tpot_best / tpot_s
        else:
            reason = f"TTFT: {fmt_seconds(ttft_best)} at best (the prefill)"
            gap = ttft_best / ttft_s
    if previous is not None and previous[1] <= gap:
        return previous
    return reason, gap


# ---- the levers ----------------------------------------------------------------------------------
def speculative(
    model: ModelConfig,
    hw: Hardware,
    traffic: Traffic,
    batches,
    k: int,
    alpha: float,
    draft: ModelConfig | None = None,
    precision: Precision | None = None,
    tp: int = 1,
    settings: Settings | None = None,
) -> dict[str, np.ndarray]:
    """Decode with and without speculation at each batch: the plain step, the verify step, the
    draft's k steps (none for n-gram drafting), tokens per verify, the speed-up (below 1: it
    slows decoding) and the verify step's intensity and regime."""
    check_positive_int(k, "k", 64)
    settings = settings or Settings()
    precision = precision or Precision()
    b = np.asarray(batches, float)
    w, _ = Workload(model, "decode", b, int(round(traffic.mean_context)), precision=precision, tp=tp).on(hw)
    c = settings.ceilings(hw, tp, cuda_graphs=True)
    plain = evaluate(step_ops(w), c)
    verify_ops = verify_step_ops(w, b, k)
    verify = evaluate(verify_ops, c)
    draft_s = np.zeros_like(b)
    if draft is not None:
        dw, _ = Workload(draft, "decode", b, int(round(traffic.mean_context)), precision=precision, tp=1).on(hw)
        draft_s = k * evaluate(step_ops(dw), settings.ceilings(hw, 1, cuda_graphs=True)).step_time_s
    tokens = expected_accepted(alpha, k)
    spec_tpot = (verify.step_time_s + draft_s) / tokens
    flops = sum(np.asarray(op.flops, float) * op.count for op in verify_ops) * np.ones_like(b)
    moved = sum(np.asarray(op.bytes, float) * op.count for op in verify_ops) * np.ones_like(b)
    return {
        "batch": b,
        "plain_tpot_s": plain.step_time_s,
        "verify_s": verify.step_time_s,
        "draft_s": draft_s,
        "tokens_per_verify": np.full_like(b, tokens),
        "spec_tpot_s": spec_tpot,
        "speedup": plain.step_time_s / spec_tpot,
        "verify_intensity": flops / moved,
        "plain_bound": plain.step_bound,
        "verify_bound": verify.step_bound,
    }


def disaggregation(
    model: ModelConfig,
    hw: Hardware,
    traffic: Traffic,
    batch: int,
    precision: Precision | None = None,
    tp: int = 1,
    settings: Settings | None = None,
    link_bytes_per_s: float | None = None,
) -> dict[str, dict[str, float]]:
    """One pool with chunked prefill against separate prefill and decode pools at the same
    decode batch: TTFT, TPOT and tokens/s per device of each, and the KV transfer per prompt
    (over ``link_bytes_per_s``, default the device's scale-up link: pools in one NVLink domain)."""
    settings = settings or Settings()
    precision = precision or Precision()
    one = serving_sweep(model, [hw], traffic, precision, tp, settings, batches=np.array([batch]))
    if hw.id in one.why_not:
        raise ValueError(one.why_not[hw.id])
    w, _ = Workload(model, "decode", batch, int(round(traffic.mean_context)), precision=precision, tp=tp).on(hw)
    c = settings.ceilings(hw, tp, cuda_graphs=True)
    decode_s = float(evaluate(step_ops(w), c).step_time_s)
    prefill_s = float(
        evaluate(step_ops(replace(w, phase="prefill", batch=1, seq_len=traffic.prompt_len)), c).step_time_s
    )
    kv_bytes = model.kv_bytes_per_token(precision.kv_dtype) * traffic.prompt_len
    link = link_bytes_per_s or (hw.interconnect.unidirectional_bytes_per_s if hw.interconnect else None)
    if not link:
        raise ValueError(f"{hw.id} has no interconnect figure for the KV transfer; give the link's bandwidth")
    transfer = kv_bytes / link
    decode_rate = batch / decode_s  # tokens/s of one decode group
    prefill_devices = decode_rate / traffic.output_len * prefill_s * tp  # devices prefilling to keep pace
    return {
        "one pool (chunked prefill)": {
            "ttft_s": float(one.ttft_s[0, 0]),
            "tpot_s": float(one.tpot_s[0, 0]),
            "tokens_per_s_per_device": float(one.per_device[0, 0]),
        },
        "prefill and decode pools": {
            "ttft_s": prefill_s + transfer,
            "tpot_s": decode_s,
            "tokens_per_s_per_device": decode_rate / (tp + prefill_devices),
            "kv_transfer_s": transfer,
            "kv_bytes_per_prompt": float(kv_bytes),
            "prefill_devices_per_decode_group": prefill_devices,
        },
    }
