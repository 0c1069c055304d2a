"""Whether a measured file's model is the model predicted beside it.

A result file names the model its server ran (vLLM's ``model_id``, GuideLLM's backend model,
aiperf's model names): a Hugging Face repository, a local path, or whatever name the server was
given (``--served-model-name``). Set beside another model's prediction, every ratio compares two
models, so the comparison says so. Names are compared loosely: the last part of a path, lower case,
letters and digits only, the file's containing the model's; a model is known by its id, its name, the
repositories its sources and FP8 checkpoint name, and the silicon sample's names for it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_REPO = re.compile(r"huggingface\.co/([\w.-]+/[\w.-]+)")
_MIN_KEY = 4  # a shorter key ("gpt", "m") would match anything


def _key(name: str) -> str:
    last = re.split(r"[/\\]", name.strip().rstrip("/\\"))[-1]
    return re.sub(r"[^a-z0-9]", "", last.lower())


def model_keys(model) -> set[str]:
    """The loose keys one model is known by."""
    from roofline.silicon_sample import MODEL_IDS

    names = [model.id, model.name, *(n for n, mid in MODEL_IDS.items() if mid == model.id)]
    names += [m[1] for s in model.sources for m in _REPO.finditer(str(s.url or ""))]
    if model.fp8_checkpoint is not None:
        names.append(model.fp8_checkpoint.repo)
    return {k for k in map(_key, names) if len(k) >= _MIN_KEY}


def _matches(file_key: str, keys: Iterable[str]) -> int:
    """The longest key contained in the file's name, 0 for none."""
    return max((len(k) for k in keys if k in file_key), default=0)


def model_mismatch(
    model, file_models: Iterable[str | None], known: Iterable = (), switch: str = "--model"
) -> str | None:
    """A sentence where a name the file records is not recognizably ``model`` (None where every
    recorded name is, or the file records none); ``known``: the other models a name may be (each
    with an id and a name), the best match named with how to pick it (``switch``)."""
    for name in dict.fromkeys(m for m in file_models if m):
        file_key = _key(name)
        if len(file_key) >= _MIN_KEY and _matches(file_key, model_keys(model)):
            continue
        scored = [(_matches(file_key, model_keys(m)), m) for m in known if m.id != model.id]
        best = max(scored, key=lambda s: s[0], default=(0, None))
        reads = f", which reads as {best[1].name} ({best[1].id})" if best[0] else ""
        return (
            f"the file was measured on {name!r}{reads}, not recognizably {model.name} ({model.id}), the model "
            "predicted here: if they differ, each ratio compares two models"
            + (f" (pick {best[1].id} with {switch})" if best[0] else "")
        )
    return None
