"""``josh extract --push-to-hub REPO``: a harvest folder's rows files as one Hugging Face dataset, a config per file.

Each file with rows goes up through ``datasets``' ``push_to_hub`` (``config_name`` = the format, one ``train``
split, Parquet on the Hub); then the folder's dataset card replaces the generated one's text, keeping the
``configs`` and ``dataset_info`` that ``push_to_hub`` wrote. The token is huggingface_hub's (``HF_TOKEN`` or
``hf auth login``).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from josh.harvest.card import CARD
from josh.util.layout import rows_file


class PushError(RuntimeError):
    """Nothing to push, or the Hub refused."""


def push_rows(folder: str | Path, repo: str, formats: tuple[str, ...], *, private: bool = False) -> list[str]:
    """Push ``folder``'s rows files in ``formats`` (the empty ones are skipped) to the dataset ``repo``; the
    formats pushed, in order."""
    from datasets import load_dataset  # optional: the train extra
    from huggingface_hub import DatasetCard  # optional: the train extra

    folder = Path(folder)
    files = {name: folder / rows_file(name) for name in formats}
    filled = [name for name, path in files.items() if path.is_file() and path.stat().st_size]
    if not filled:
        raise PushError(f"no rows in {folder} to push (files {', '.join(rows_file(f) for f in formats)} are empty)")
    with tempfile.TemporaryDirectory() as cache:  # a fresh Arrow cache: the files as written now, never an older copy
        for name in filled:
            rows = load_dataset("json", data_files=str(files[name]), split="train", cache_dir=cache)
            rows.push_to_hub(repo, config_name=name, split="train", private=private)
    if (folder / CARD).is_file():
        card = DatasetCard((folder / CARD).read_text(encoding="utf-8"))
        pushed = DatasetCard.load(repo, repo_type="dataset")
        for key in ("configs", "dataset_info"):
            card.data[key] = pushed.data.get(key)
        card.push_to_hub(repo, repo_type="dataset")
    return filled
