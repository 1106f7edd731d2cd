"""``josh data import-paper``: the authors' JOSH rollouts as a josh rollout folder plus the rows ``josh extract``
writes.

The rollouts become ``trees.jsonl`` (``josh.harvest.paper_trees``) under the josh ReACT agent's frame for ToolWOZ,
and ``josh.harvest.extract`` turns those trees into ``sft.jsonl``, ``kto.jsonl``, ``dpo.jsonl`` and
``extract_stats.json`` with its own rules, so the rows are the ones ``josh extract`` would write. The whole
archive is read and checked before anything is written, and the folder appears at once or not at all.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from josh.agents import agent_prompt
from josh.envs import build_env
from josh.harvest.card import CardSource
from josh.harvest.extract import ExtractConfig, ExtractStats, extract
from josh.harvest.paper_archive import read_rollouts
from josh.harvest.paper_trees import ConvertStats, rollout_tree
from josh.types import Task
from josh.util.atomic import write_atomic, write_folder_atomic
from josh.util.layout import TREES

IMPORT_STATS = "import_stats.json"


def paper_source(archive: str | Path, trees: Path) -> CardSource:
    """The dataset card's source for the authors' rollouts (the josh-train wheel is MIT)."""
    return CardSource(
        trees=f"{trees} (rebuilt from {Path(archive).name})",
        environment="toolwoz (the paper's ToolWOZ)",
        policy="the authors' JOSH rollouts of Llama-3-8B (josh-train 0.1.4, llama3-josh-toolwoz-for-KTO.zip)",
        licence="mit",
        licence_note="the josh-train 0.1.4 wheel that ships these rollouts is MIT; Llama-3's outputs also fall "
        "under Meta's Llama 3 licence",
    )


class ImportStats(BaseModel):
    """What ``import_paper`` read (``convert``) and wrote (``extract``): ``import_stats.json``."""

    archive: str
    convert: ConvertStats
    extract: ExtractStats


def import_paper(archive: str | Path, out: str | Path, config: ExtractConfig | None = None) -> ImportStats:
    """Write ``out`` (a new or empty folder): ``trees.jsonl``, the extracted rows, their dataset card and
    ``import_stats.json``."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ValueError(f"{out} already exists and is not an empty folder; pass a new --out")
    rollouts = read_rollouts(archive)
    frame = agent_prompt("react", build_env("toolwoz", "mini")).frame(Task(id="paper", env="toolwoz"))
    convert = ConvertStats()
    trees = [rollout_tree(r, frame, convert) for r in rollouts]
    holder: dict[str, ExtractStats] = {}

    def fill(folder: Path) -> None:
        write_atomic(folder / TREES, (t.model_dump_json() + "\n" for t in trees))
        source = paper_source(archive, out / TREES)
        holder["stats"] = extract(folder / TREES, folder, config or ExtractConfig(), source=source)
        stats = ImportStats(archive=str(archive), convert=convert, extract=holder["stats"])
        write_atomic(folder / IMPORT_STATS, stats.model_dump_json(indent=2) + "\n")

    write_folder_atomic(out, fill)
    return ImportStats(archive=str(archive), convert=convert, extract=holder["stats"])
