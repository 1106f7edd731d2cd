"""The no-selection control's data: one random root-to-leaf branch per searched tree as an SFT row, whatever its
reward, under the ideal path's error rule (``josh.harvest.extract``). Trained like JOSH-SFT on as many rows, it isolates what
the sparse reward's selection adds."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

from josh.harvest.card import rollout_source
from josh.harvest.dedupe import dedupe, row_key
from josh.harvest.extract import (
    ExtractConfig,
    Extracted,
    ExtractStats,
    TokenCounter,
    clean_path,
    counted,
    read_trees,
    sft_row,
    whitespace_tokens,
    write_all,
)
from josh.harvest.reframe import Reframe, reframed
from josh.search.tree import Node, Tree, trees_file


def random_branch(tree: Tree, rng: random.Random) -> list[Node]:
    """Root to a leaf, taking a uniformly random child that has an agent turn at every branching point."""
    children = tree.children()
    path = [tree.node(0)]
    while options := [c for c in children.get(path[-1].id, []) if c.messages]:
        path.append(rng.choice(options))
    return path


def random_rows(
    trees: Iterator[Tree] | list[Tree], config: ExtractConfig, seed: int, stats: ExtractStats, limit: int | None = None
) -> Extracted:
    """One random branch per tree as an SFT row (no reward threshold; the same error rule as the ideal path).
    The branch of a tree depends only on ``seed`` and its task id. With ``limit``, a random ``limit`` of those rows
    (in tree order) are kept, and ``stats.random_pool`` counts the rows they were drawn from. ``stats.random_rewarded``
    counts the kept branches with a turn that met a goal: how often the control's data was rewarded anyway."""
    out = Extracted()
    met: set[str] = set()
    for tree in trees:
        stats.rewarded += tree.reward > 0
        if tree.error is not None or not tree.nodes:
            stats.failed_tasks += 1
            continue
        chosen = clean_path(random_branch(tree, random.Random(f"{seed}|{tree.task_id}")), config)
        if not counted(chosen, stats):
            continue
        row = sft_row(tree, chosen.path)
        if any(n.goals for n in chosen.path):
            met.add(row_key(row, "messages"))
        out.sft.append(row)
    out.sft = dedupe(out.sft, ("messages",), stats)
    if limit is not None and len(out.sft) > limit:
        stats.random_pool = len(out.sft)
        kept = sorted(random.Random(f"{seed}|rows").sample(range(len(out.sft)), limit))
        out.sft = [out.sft[i] for i in kept]
    stats.sft = len(out.sft)
    stats.random_rewarded = sum(row_key(row, "messages") in met for row in out.sft)
    return out


def extract_random(
    trees_path: str | Path,
    out_dir: str | Path,
    config: ExtractConfig,
    seed: int,
    *,
    count_tokens: TokenCounter | None = None,
    counter_name: str = "whitespace",
    limit: int | None = None,
    reframe: Reframe | None = None,
) -> ExtractStats:
    """The no-selection control's files: ``sft.jsonl`` with one random branch per tree (``random_rows``, at most
    ``limit`` of them), no KTO or DPO file (it makes none of those rows), ``extract_stats.json`` and the dataset card;
    ``reframe`` frames the trees for the trained agent first, as ``extract`` does."""
    stats = ExtractStats(token_counter=counter_name if count_tokens else "whitespace")
    trees = list(read_trees(trees_file(trees_path), stats))
    if reframe is not None:
        trees = reframed(trees, reframe, stats)
    rows = random_rows(trees, config, seed, stats, limit)
    source = rollout_source(trees_file(trees_path))
    source.extra["selection"] = f"none: one random branch per tree (the no-selection control, seed {seed})"
    if reframe is not None:
        source.extra["rows framed for"] = reframe.describe()
    write_all(Path(out_dir), rows, stats, count_tokens or whitespace_tokens, source=source)
    return stats
