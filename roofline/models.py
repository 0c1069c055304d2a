"""Model architectures: the cached loader of ``model_db/*.toml`` and of a Hugging Face
``config.json`` named by path. The record itself (``ModelConfig``) is in ``roofline.model_schema``;
it is re-exported here, where callers have always found it."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from roofline.datafiles import load_dirs, load_record, search_dirs, shown_path
from roofline.hf_config import load_hf_config
from roofline.model_schema import MLA, ModelConfig, MoE

__all__ = ["MLA", "ModelConfig", "MoE", "get_model", "load_model_file", "load_models", "model_dirs"]

SHIPPED_MODEL_DIR = Path(__file__).resolve().parent.parent / "model_db"
MODEL_DIR_ENV = "ROOFLINE_MODEL_DIR"


def load_model_file(path: Path) -> ModelConfig:
    return load_record(path, ModelConfig)


def model_dirs(extra_dir: str | Path | None = None) -> tuple[Path, ...]:
    return search_dirs(SHIPPED_MODEL_DIR, MODEL_DIR_ENV, extra_dir)


@lru_cache(maxsize=16)
def _load_dirs(dirs: tuple[Path, ...]) -> dict[str, ModelConfig]:
    return load_dirs(dirs, ModelConfig, "model")


def load_models(extra_dir: str | Path | None = None) -> dict[str, ModelConfig]:
    return dict(_load_dirs(model_dirs(extra_dir)))


def get_model(model_id: str, extra_dir: str | Path | None = None) -> ModelConfig:
    """A model by id, or from a Hugging Face ``config.json`` when given its path."""
    if model_id.endswith(".json"):
        return load_hf_config(model_id)
    models = load_models(extra_dir)
    try:
        return models[model_id]
    except KeyError:
        folder = Path(model_id)
        if ("/" in model_id or "\\" in model_id) and folder.is_dir():  # a checkpoint's folder, not its config
            config = folder / "config.json"
            what = f"give its config.json ({shown_path(config)})" if config.is_file() else "it holds no config.json"
            raise ValueError(f"model {shown_path(model_id)!r} is a folder: {what}") from None
        raise ValueError(f"unknown model {shown_path(model_id)!r}; allowed: {', '.join(sorted(models))}") from None
