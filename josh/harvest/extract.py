"""Turn search trees (``trees.jsonl``) into SFT, KTO and DPO training files in TRL's conversational formats.

* SFT: the ideal path of every accepted tree as one conversation, system prompt first, with the tools offered.
* KTO: every agent turn on the ideal path is desirable; every sibling turn that branched from the same user turn
  and was pruned is undesirable. Partial-credit turns are neither. A prompt+completion emitted as desirable is
  never emitted as undesirable too (the conflicting negative is dropped).
* DPO: (ideal turn, pruned sibling turn) pairs that share their prompt.

A tree is accepted when the search ran (no task-level error), its reward reaches ``min_reward`` and no turn on its
ideal path has one of ``drop_errors``. With ``trim_at_failure`` an ideal path whose later turn has such an error is
kept up to that turn instead (its correct turns are still worth learning); only a path whose first turn failed is
dropped. Negatives come only from accepted trees; tool errors in a negative are kept (they are what it should
unlearn). Completions are compared without tool-call ids, which are random per sample. Rows are deduplicated per
file, first occurrence kept (``josh.harvest.dedupe``).

With ``judge`` set, an LLM judge gates the ideal path's replies first (``josh.harvest.judge_gate``: a failed turn
cuts the SFT conversation before it, is no KTO desirable nor DPO chosen, and with ``route: kto`` a KTO undesirable).

The no-selection control's rows (one random branch per tree) come from ``josh.harvest.control``.

The ``tree`` format (``tree.jsonl``, ``josh.harvest.advantages``) holds every sibling turn of every branching point of every
searched tree, whatever its reward, with its turn-level advantage; groups whose advantages are all zero are skipped
and counted (``tree_zero_groups``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from josh.core.llm import LLM
from josh.core.rows import FIELDS, FORMATS, TRL_FORMATS, Row
from josh.harvest.advantages import AdvantageConfig, AdvantageStats, advantage_rows
from josh.harvest.card import CardSource, rollout_source, write_card
from josh.harvest.dedupe import dedupe, messages_key, resolve_kto
from josh.harvest.extract_stats import ExtractStats
from josh.harvest.judge_gate import (
    GateStats,
    JudgeGate,
    Reply,
    ReplyJudge,
    failed_turns,
    gate_cut,
    path_replies,
    run_gate,
)
from josh.harvest.reframe import Reframe, reframed
from josh.harvest.trl_rows import arguments_text, trl_messages
from josh.llm.models import resolve_model
from josh.search.tree import Node, Tree, path_messages, trees_file
from josh.types import ErrorCategory, Message
from josh.util.atomic import write_atomic
from josh.util.jsonl import iter_numbered, read_models
from josh.util.layout import EXTRACT_STATS as STATS_FILE
from josh.util.layout import rows_file

TokenCounter = Callable[[str], int]


class ExtractConfig(BaseModel):
    """Which trees and turns become training data."""

    model_config = ConfigDict(extra="forbid")

    min_reward: float = Field(1.0, ge=0.0, le=1.0, description="trees below this reward are skipped")
    drop_errors: list[ErrorCategory] = Field(
        default_factory=lambda: [c for c in ErrorCategory if c is not ErrorCategory.USER_ERROR],
        description="ideal paths with any of these are skipped (a user-simulator failure is not the agent's)",
    )
    trim_at_failure: bool = Field(
        False,
        description="keep an ideal path's turns before its first turn with one of drop_errors instead of dropping "
        "the tree",
    )
    judge: JudgeGate | None = Field(None, description="an LLM judge gates the ideal path's replies (default: off)")

    @model_serializer(mode="wrap")
    def _without_gate_off(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Leave ``judge`` out while it is off, so settings written before the gate existed still match."""
        data = handler(self)
        if self.judge is None:
            data.pop("judge", None)
        return data


class Extracted(BaseModel):
    """The rows of the files."""

    sft: list[Row] = Field(default_factory=list)
    kto: list[Row] = Field(default_factory=list)
    dpo: list[Row] = Field(default_factory=list)
    tree: list[Row] = Field(default_factory=list)


def read_trees(
    path: str | Path, stats: ExtractStats | None = None, *, skip_bad_lines: bool | None = None
) -> Iterator[Tree]:
    """The finished trees of a ``trees.jsonl`` file: the latest line of each task, unless that tree is ``failed``
    (its LLM failed: no training data; counted as ``llm_failed``). A line that is not a tree raises
    ``CorruptLineError`` naming the file and line, unless ``skip_bad_lines`` (default: inside
    ``josh.util.jsonl.skipping_bad_lines``); skipped lines (and a last line cut short by a crash) count as
    ``unreadable``."""
    stats = stats if stats is not None else ExtractStats()

    def skipped(line: int, reason: str) -> None:
        stats.unreadable += 1

    latest: dict[str, tuple[int, bool]] = {}
    keep: set[int] = set()  # lines that are not trees stay in, so that reading them reports them
    for number, value in iter_numbered(path, skip_bad=True):
        if isinstance(value, dict) and isinstance(value.get("task_id"), str):
            latest[value["task_id"]] = (number, bool(value.get("failed")))
        else:
            keep.add(number)
    stats.llm_failed += sum(bad for _, bad in latest.values())
    keep |= {number for number, bad in latest.values() if not bad}
    for tree in read_models(path, Tree, "a search tree", skip_bad=skip_bad_lines, on_skip=skipped, lines=keep):
        stats.trees += 1
        yield tree


def _dicts(messages: list[Message]) -> list[Row]:
    return trl_messages(messages)


class Selection(BaseModel):
    """The turns of one tree to train on (root first), or why it gives none."""

    path: list[Node] = Field(default_factory=list)
    reason: str | None = None
    trimmed: bool = False


def _before_failure(path: list[Node], banned: set[ErrorCategory]) -> list[Node]:
    """``path`` up to, not including, its first turn with one of ``banned``."""
    for i, node in enumerate(path):
        if banned.intersection(node.errors):
            return path[:i]
    return path


def clean_path(path: list[Node], config: ExtractConfig) -> Selection:
    """Apply the error rule to a root-first path: keep it, trim it at its first failed turn, or drop it."""
    kept = _before_failure(path, set(config.drop_errors))
    if len(kept) == len(path):
        return Selection(path=path) if len(path) >= 2 else Selection(reason="below_reward")
    if config.trim_at_failure and len(kept) >= 2:
        return Selection(path=kept, trimmed=True)
    return Selection(reason="with_errors")


def select(tree: Tree, config: ExtractConfig) -> Selection:
    """The part of a tree's ideal path that becomes training data, or the reason there is none (a tree whose LLM
    failed gives none: ``read_trees`` leaves such trees out, and so does this)."""
    if tree.failed is not None:
        return Selection(reason="llm_failed")
    if tree.error is not None or not tree.nodes:
        return Selection(reason="failed_tasks")
    if tree.reward < config.min_reward - 1e-9:
        return Selection(reason="below_reward")
    return clean_path(tree.ideal_path(), config)


def counted(selection: Selection, stats: ExtractStats) -> bool:
    """Count a tree's selection in ``stats`` (its rejection reason, or accepted and whether trimmed); True when kept."""
    if selection.reason is not None:
        setattr(stats, selection.reason, getattr(stats, selection.reason) + 1)
        return False
    stats.accepted += 1
    stats.trimmed += selection.trimmed
    return True


def rejection(tree: Tree, config: ExtractConfig) -> str | None:
    """Why a tree gives no training data (``None`` when it is accepted)."""
    return select(tree, config).reason


def _negatives(tree: Tree, parent: Node, children: dict[int, list[Node]]) -> list[Node]:
    """Pruned sibling turns off ``parent`` that never reached a reward and have a turn to learn from."""
    return [c for c in children.get(parent.id, []) if c.pruned and not (c.ideal or c.partial) and c.messages]


def sft_row(tree: Tree, path: list[Node]) -> Row:
    """The conversation along ``path`` (system prompt first, no user reply after its last turn)."""
    return {"messages": _dicts(path_messages(tree, path[-1].id, user_reply=False)), "tools": list(tree.tools)}


def tree_rows(
    tree: Tree, path: list[Node] | None = None, *, failed: set[int] | None = None, failed_to_kto: bool = False
) -> Extracted:
    """All rows of one accepted tree along ``path`` (default: the whole ideal path); no filtering, no dedupe.
    Turns in ``failed`` (node ids that failed the judge gate) cut the SFT row before them and give no desirable or
    chosen row; with ``failed_to_kto`` each is a KTO undesirable row."""
    tools = list(tree.tools)
    path = path or tree.ideal_path()
    failed = failed or set()
    children = tree.children()
    kept = gate_cut(path, failed)
    sft = [sft_row(tree, path[:kept])] if kept >= 2 else []
    kto: list[Row] = []
    dpo: list[Row] = []
    for node in path[1:]:
        parent = tree.node(node.parent or 0)
        prompt = _dicts(path_messages(tree, parent.id))
        good = _dicts(node.messages)
        if node.id not in failed:
            kto.append({"prompt": prompt, "completion": good, "label": True, "tools": tools})
        elif failed_to_kto:
            kto.append({"prompt": prompt, "completion": good, "label": False, "tools": tools})
        for bad in _negatives(tree, parent, children):
            kto.append({"prompt": prompt, "completion": _dicts(bad.messages), "label": False, "tools": tools})
            if node.id not in failed and messages_key(bad.messages) != messages_key(node.messages):
                dpo.append({"prompt": prompt, "chosen": good, "rejected": _dicts(bad.messages), "tools": tools})
    return Extracted(sft=sft, kto=kto, dpo=dpo)


def extract_rows(
    trees: Iterator[Tree] | list[Tree], config: ExtractConfig, stats: ExtractStats, failing: set[str] | None = None
) -> Extracted:
    """Filter, convert and deduplicate; counts go into ``stats``. ``failing``: keys of the replies that failed the
    judge gate (``run_gate``), whose turns are gated as ``config.judge.route`` says."""
    out = Extracted()
    for tree in trees:
        stats.rewarded += tree.reward > 0
        chosen = select(tree, config)
        if not counted(chosen, stats):
            continue
        failed = failed_turns(tree, chosen.path, failing, stats.gate) if failing is not None else set()
        to_kto = config.judge is not None and config.judge.route == "kto"
        if to_kto and stats.gate is not None:
            stats.gate.to_kto += len(failed)
        rows = tree_rows(tree, chosen.path, failed=failed, failed_to_kto=to_kto)
        out.sft.extend(rows.sft)
        out.kto.extend(rows.kto)
        out.dpo.extend(rows.dpo)
    out.sft = dedupe(out.sft, ("messages",), stats)
    out.kto = resolve_kto(dedupe(out.kto, ("prompt", "completion"), stats), stats)
    out.dpo = dedupe(out.dpo, ("prompt", "chosen", "rejected"), stats)
    stats.sft, stats.dpo = len(out.sft), len(out.dpo)
    stats.kto_desirable = sum(1 for r in out.kto if r["label"])
    stats.kto_undesirable = len(out.kto) - stats.kto_desirable
    stats.kto_desirable_fraction = round(stats.kto_desirable / len(out.kto), 4) if out.kto else 0.0
    return out


def gate_replies(trees: list[Tree], config: ExtractConfig) -> list[Reply]:
    """The replies the judge gate judges: those on the kept part of each accepted tree's ideal path."""
    chosen = [(tree, select(tree, config)) for tree in trees]
    return [r for tree, c in chosen if c.reason is None for r in path_replies(tree, c.path)]


def whitespace_tokens(text: str) -> int:
    return len(text.split())


def _row_tokens(row: Row, fields: tuple[str, ...], count: TokenCounter) -> int:
    total = 0
    for field in fields:
        for m in row[field]:
            total += count(m.get("content") or "")
            for call in m.get("tool_calls") or ():
                total += count(call["function"]["name"]) + count(arguments_text(call["function"]["arguments"]))
    return total


def _write_jsonl(path: Path, rows: list[Row]) -> None:
    """Write the whole file at once: a crash never leaves half a file."""
    write_atomic(path, (json.dumps(row, ensure_ascii=False) + "\n" for row in rows))


def write_all(
    out_dir: Path,
    rows: Extracted,
    stats: ExtractStats,
    count: TokenCounter,
    formats: tuple[str, ...] = TRL_FORMATS,
    source: CardSource | None = None,
) -> None:
    """The rows files, ``extract_stats.json`` and, with ``source``, the dataset card (``README.md``). A format with
    no rows gets no file (``datasets.load_dataset`` cannot read an empty one), and an earlier extraction's file of it
    is removed; the card and the statistics say so."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in formats:
        data: list[Row] = getattr(rows, name)
        if data:
            _write_jsonl(out_dir / rows_file(name), data)
        else:
            (out_dir / rows_file(name)).unlink(missing_ok=True)
        stats.tokens[name] = sum(_row_tokens(r, FIELDS[name], count) for r in data)
    write_atomic(out_dir / STATS_FILE, stats.model_dump_json(indent=2) + "\n")
    if source is not None:
        write_card(out_dir, source, stats, formats)


def _tree_rows(trees: list[Tree], config: AdvantageConfig, stats: ExtractStats) -> list[Row]:
    found = AdvantageStats()
    rows = advantage_rows(trees, config, found)
    stats.tree_groups, stats.tree_zero_groups, stats.tree_rows = found.groups, found.zero_groups, found.rows
    return rows


def extract(
    trees_path: str | Path,
    out_dir: str | Path,
    config: ExtractConfig | None = None,
    *,
    count_tokens: TokenCounter | None = None,
    counter_name: str = "whitespace",
    skip_bad_lines: bool | None = None,
    formats: tuple[str, ...] = TRL_FORMATS,
    advantages: AdvantageConfig | None = None,
    judge: ReplyJudge | None = None,
    judge_llm: LLM | None = None,
    source: CardSource | None = None,
    reframe: Callable[[Tree], Tree] | None = None,
) -> ExtractStats:
    """Read ``trees_path`` (a file or a run folder) and write ``<format>.jsonl`` for each of ``formats`` (default
    ``sft``, ``kto``, ``dpo``; ``tree`` adds the turn-level advantages) and ``extract_stats.json`` to ``out_dir``
    (named so it never overwrites the rollout's own ``stats.json``).
    A line that is not a tree stops it (nothing is written) unless ``skip_bad_lines``. With ``config.judge``,
    ``judge`` scores the replies (with ``judge_llm``, default: the LLM ``config.judge`` names). The dataset card
    (``README.md``, ``josh.harvest.card``) states ``source``, by default the rollout's own ``stats.json``.
    ``reframe`` (``josh.harvest.reframe.Reframe``) puts the frame of the agent to be trained on every tree first;
    without it each row has its tree's own recorded frame (none for a scripted agent's trees)."""
    unknown = sorted(set(formats) - set(FORMATS))
    if unknown or not formats:
        raise ValueError(f"unknown format {', '.join(unknown) or '(none)'}; choose from {', '.join(FORMATS)}")
    config = config or ExtractConfig()
    if config.judge is not None and judge is None:
        raise ValueError("extract.judge is set but no reply judge was given (josh extract and josh loop give one)")
    stats = ExtractStats(token_counter=counter_name if count_tokens else "whitespace")
    trees = list(read_trees(trees_file(trees_path), stats, skip_bad_lines=skip_bad_lines))
    if reframe is not None:
        trees = reframed(trees, reframe, stats)
    trl = bool(set(formats) & set(TRL_FORMATS))
    failing = None
    if trl and config.judge is not None and judge is not None:
        stats.gate = GateStats()
        replies = gate_replies(trees, config)
        failing = run_gate(replies, config.judge, judge, Path(out_dir), stats.gate, llm=judge_llm)
    rows = extract_rows(trees, config, stats, failing) if trl else Extracted()
    if "tree" in formats:
        rows.tree = _tree_rows(trees, advantages or AdvantageConfig(), stats)
    source = source or rollout_source(trees_file(trees_path))
    if isinstance(reframe, Reframe):
        source = source.model_copy(update={"extra": {**source.extra, "rows framed for": reframe.describe()}})
    write_all(Path(out_dir), rows, stats, count_tokens or whitespace_tokens, formats, source)
    return stats


def hf_token_counter(name: str) -> TokenCounter:
    """Count tokens with a Hugging Face tokenizer (``smollm2`` or any name ``resolve_model`` knows)."""
    from transformers import AutoTokenizer  # optional: the train extra

    tok = AutoTokenizer.from_pretrained(resolve_model(name))
    return lambda text: len(tok.encode(text, add_special_tokens=False))


def extract_run(
    run: str | Path,
    out: str | Path | None,
    config: ExtractConfig,
    *,
    tokenizer: str | None = None,
    skip_bad_lines: bool | None = None,
    formats: tuple[str, ...] = TRL_FORMATS,
    advantages: AdvantageConfig | None = None,
    judge: ReplyJudge | None = None,
    reframe: Callable[[Tree], Tree] | None = None,
) -> tuple[ExtractStats, Path]:
    """``josh extract``: files go to ``out`` or, by default, next to the trees."""
    run = Path(run)
    out_dir = Path(out) if out else (run if run.is_dir() else run.parent)
    counter = hf_token_counter(tokenizer) if tokenizer else None
    name = tokenizer or "whitespace"
    stats = extract(
        run, out_dir, config, count_tokens=counter, counter_name=name, skip_bad_lines=skip_bad_lines,
        formats=formats, advantages=advantages, judge=judge, reframe=reframe,
    )  # fmt: skip
    return stats, out_dir
