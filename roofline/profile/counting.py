"""FLOPs and bytes of one aten op from the shapes and dtypes a profiler recorded.

No torch here: a trace from another machine is read where torch is missing. The matmul and
attention formulas are those of ``torch.utils.flop_counter`` (2·M·N·K per matmul; attention
as its two batched matmuls, causal or not, and five for its backward), so a profile's FLOPs
agree with ``FlopCounterMode`` op by op; the tests check it on real modules. Bytes are the
op's tensor inputs plus its output, each at its own dtype (DESIGN.md: a linear moves weights +
input + output). A trace records inputs only, so the output's shape is inferred for the ops
where it is known (matmuls, attention, embedding, elementwise); views and allocations move
nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# The profiler's names for tensor element types -> the project's dtype names and sizes.
TRACE_DTYPES: dict[str, tuple[str, int]] = {
    "float": ("fp32", 4),
    "double": ("fp64", 8),
    "c10::BFloat16": ("bf16", 2),
    "c10::Half": ("fp16", 2),
    "c10::Float8_e4m3fn": ("fp8", 1),
    "c10::Float8_e5m2": ("fp8", 1),
    "long int": ("int64", 8),
    "int": ("int32", 4),
    "short int": ("int16", 2),
    "signed char": ("int8", 1),
    "unsigned char": ("uint8", 1),
    "bool": ("bool", 1),
    "c10::complex<float>": ("complex64", 8),
}
FLOAT_DTYPES = ("fp32", "bf16", "fp16", "fp8", "fp64")

_VIEWS = frozenset(
    "view reshape _reshape_alias _unsafe_view t transpose permute expand expand_as as_strided slice select "
    "unsqueeze squeeze split split_with_sizes chunk unbind detach alias narrow view_as unflatten flatten "
    "empty empty_like empty_strided resize_ lift_fresh result_type is_nonzero set_ resolve_conj resolve_neg "
    "_local_scalar_dense item size stride numel contiguous_ detach_ requires_grad_ "
    "_has_compatible_shallow_copy_type".split()
)
_MATMULS = frozenset("mm addmm bmm baddbmm matmul linear addmv mv dot _scaled_mm _int_mm einsum".split())
_ATTENTION_PREFIXES = ("_scaled_dot_product", "scaled_dot_product", "_flash_attention", "_efficient_attention")
_NORMS = ("norm", "rms_norm", "layer_norm", "group_norm", "batch_norm")
_REDUCTIONS = frozenset("sum mean amax amin max min argmax argmin var std norm prod any all".split())
_COPIES = frozenset(
    "copy_ clone contiguous to _to_copy cat stack index_copy_ index_select gather scatter zero_ fill_".split()
)
COMMUNICATION_WORDS = (
    "nccl",
    "c10d::",
    "gloo",
    "allreduce",
    "all_reduce",
    "allgather",
    "all_gather",
    "reduce_scatter",
    "broadcast_",
    "alltoall",
    "record_param_comms",
)


@dataclass(frozen=True)
class Tensor:
    shape: tuple[int, ...]
    dtype: str
    itemsize: int

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.numel * self.itemsize


@dataclass(frozen=True)
class Count:
    """What one occurrence of an op does."""

    op_class: str  # linear, attention, norm, elementwise, reduction, copy, view, communication, other
    flops: float
    bytes: float
    dtype: str  # the dtype its math runs in (the first floating-point input's)


def base_name(name: str) -> str:
    """``aten::addmm`` -> ``addmm``; overload suffixes (``.default``) dropped."""
    return name.split("::", 1)[-1].split(".", 1)[0]


def is_communication(name: str) -> bool:
    low = name.lower()
    return any(word in low for word in COMMUNICATION_WORDS)


# No device holds a tensor of more elements than this (2^40: a TiB of bytes).
MAX_TRACE_ELEMENTS = 2**40


def _checked(shape: list) -> tuple[int, ...]:
    """A recorded shape, refused where it holds more elements than any device could."""
    elements = math.prod(int(d) for d in shape)
    if elements > MAX_TRACE_ELEMENTS:
        raise ValueError(
            f"trace: a tensor of shape {list(shape)[:8]} holds {elements:.3g} elements, more than any device's memory "
            f"(at most 2^40): not a recorded run's"
        )
    return tuple(int(d) for d in shape)


def tensors(dims: list, types: list) -> list[Tensor | None]:
    """One Tensor per recorded input (None for scalars and absent arguments); a tensor list's
    shapes become several tensors at the end."""
    out: list[Tensor | None] = []
    extra: list[Tensor] = []
    for shape, kind in zip(dims, types):
        known = TRACE_DTYPES.get(kind) if isinstance(kind, str) else None
        if kind == "TensorList":  # its element type is not recorded: float32 assumed
            known = TRACE_DTYPES["float"]
        if known is None or not isinstance(shape, list):
            out.append(None)
            continue
        if shape and all(isinstance(s, list) for s in shape):  # a TensorList
            extra.extend(Tensor(_checked(s), *known) for s in shape if all(isinstance(d, int) and d >= 0 for d in s))
            out.append(None)
        elif all(isinstance(d, int) and d >= 0 for d in shape):
            out.append(Tensor(_checked(shape), *known))
        else:
            out.append(None)
    return out + extra


def _broadcast(shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    rank = max((len(s) for s in shapes), default=0)
    out = [1] * rank
    for s in shapes:
        for i, d in enumerate(s, start=rank - len(s)):
            out[i] = max(out[i], d)
    return tuple(out)


def _matmul(name: str, ins: list[Tensor | None]) -> tuple[float, tuple[int, ...]] | None:
    """(FLOPs, output shape) of a matmul-family op, flop_counter's convention (bias adds not counted)."""
    t = [x for x in ins if x is not None]
    if name in ("addmm", "baddbmm", "addmv") and len(t) >= 3:
        t = t[1:]
    if name == "linear" and len(t) >= 2:
        x, w = t[0], t[1]
        if len(w.shape) != 2 or not x.shape:
            return None
        lead = x.shape[:-1]
        return 2.0 * math.prod(lead) * w.shape[0] * w.shape[1], (*lead, w.shape[0])
    if len(t) < 2:
        return None
    a, b = t[0].shape, t[1].shape
    if name in ("mv", "addmv") and len(a) == 2:
        return 2.0 * a[0] * a[1], (a[0],)
    if name == "dot":
        return 2.0 * math.prod(a), ()
    if len(a) < 2 or len(b) < 1:
        return None
    if len(b) == 1:
        return 2.0 * math.prod(a), a[:-1]
    batch = _broadcast([a[:-2], b[:-2]])
    m, k, n = a[-2], a[-1], b[-1]
    return 2.0 * math.prod(batch) * m * n * k, (*batch, m, n)


def _attention(name: str, ins: list[Tensor | None]) -> tuple[float, tuple[int, ...]] | None:
    t = [x for x in ins if x is not None and len(x.shape) == 4]
    if "backward" in name:  # grad_out, q, k, v, out, ...: recompute scores + four matmuls
        if len(t) < 4:
            return None
        q, k, v = t[1].shape, t[2].shape, t[3].shape
        if "_flash_attention_backward" in name or "_efficient_attention_backward" in name:  # (b, s, h, d)
            q, k, v = _bshd(q), _bshd(k), _bshd(v)
        b, h, sq, dq = q
        sk, dv = k[2], v[3]
        return 2.0 * b * h * sq * sk * (3 * dq + 2 * dv), ()
    if len(t) < 3:
        return None
    q, k, v = t[0].shape, t[1].shape, t[2].shape
    if name in ("_flash_attention_forward", "_efficient_attention_forward"):  # (b, s, h, d) layout
        q, k, v = _bshd(q), _bshd(k), _bshd(v)
    b, h, sq, dq = q
    sk, dv = k[2], v[3]
    return 2.0 * b * h * sq * sk * (dq + dv), (b, h, sq, dv)


def _bshd(shape: tuple[int, ...]) -> tuple[int, ...]:
    return (shape[0], shape[2], shape[1], shape[3])


def classify(name: str) -> str:
    base = base_name(name)
    if is_communication(name):
        return "communication"
    if base in _VIEWS:
        return "view"
    if base in _MATMULS:
        return "linear"
    if base.startswith(_ATTENTION_PREFIXES):
        return "attention"
    if any(word in base for word in _NORMS):
        return "norm"
    if base.rstrip("_") in _REDUCTIONS:
        return "reduction"
    if base in _COPIES or base.startswith(("embedding", "index", "gather", "scatter")):
        return "copy"
    if base.startswith(("empty", "zeros", "ones", "full", "arange", "rand", "normal")):
        return "copy"
    return "elementwise" if name.startswith("aten::") else "other"


def count(name: str, dims: list, types: list) -> Count:
    """FLOPs and bytes of one occurrence of the op ``name`` whose inputs had ``dims`` and ``types``."""
    ins = tensors(dims, types)
    present = [x for x in ins if x is not None]
    floats = [x.dtype for x in present if x.dtype in FLOAT_DTYPES]
    dtype = floats[0] if floats else (present[0].dtype if present else "fp32")
    itemsize = next((x.itemsize for x in present if x.dtype == dtype), 4)
    base = base_name(name)
    op_class = classify(name)
    in_bytes = float(sum(x.nbytes for x in present))
    flops = 0.0
    out_shape: tuple[int, ...] | None = None
    if op_class == "view" or not present:
        return Count(op_class, 0.0, 0.0, dtype)
    if op_class == "linear":
        got = _matmul(base, ins)
        if got is not None:
            flops, out_shape = got
    elif op_class == "attention":
        got = _attention(base, ins)
        if got is not None:
            flops, out_shape = got
    elif base.startswith("embedding") and "backward" not in base and len(present) >= 2:
        weight, ids = present[0], present[1]
        out_shape = (*ids.shape, weight.shape[-1])  # a gather: the rows read, not the table
        in_bytes = float(ids.nbytes + math.prod(out_shape) * weight.itemsize)
    elif op_class == "reduction":
        out_shape = ()
        flops = float(present[0].numel)
    elif op_class == "communication":
        out_shape = present[0].shape
    elif base.startswith("_foreach"):  # one elementwise op over each tensor of the first list
        first = tensors(dims[:1], types[:1])
        written = sum(x.numel for x in first if x is not None)
        flops = 0.0 if "copy" in base or "zero" in base else float(written)
        return Count("elementwise", flops, in_bytes + written * itemsize, dtype)
    elif base.endswith("_"):  # in place: the first input is written back
        out_shape = present[0].shape
        flops = 0.0 if op_class == "copy" else float(present[0].numel)
    else:
        out_shape = _broadcast([x.shape for x in present])
        if op_class in ("elementwise", "norm"):
            flops = float(math.prod(out_shape)) * (5.0 if op_class == "norm" else 1.0)
    out_bytes = float(math.prod(out_shape)) * itemsize if out_shape is not None else 0.0
    return Count(op_class, flops, in_bytes + out_bytes, dtype)


def comm_bytes(dims: list, types: list) -> float:
    """Bytes a collective's tensors hold (what a ring all-reduce moves, about twice over)."""
    return float(sum(x.nbytes for x in tensors(dims, types) if x is not None))
