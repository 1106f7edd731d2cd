"""``josh view``: self-contained HTML pages of JOSH search trees, to see why a path won.

A tree page lays out every node (one agent turn and the user's reply) as a tree, root first. Each node carries its
flags as a colour and a text label (ideal, partial credit, pruned, dead, ended, not scored), the goals it
completed, its error categories and its LLM calls and tokens; tool calls and their results fold out. The turns are
read with the agent's own protocol (``josh.agents.protocol``): ReACT text is split into its commands, ACT actions
and observations are paired like native tool calls and their results. The index page lists every task of a run with links to its
tree page. An evaluation folder (``results.jsonl``, no trees) gets one page per conversation instead, each agent
reply with its judgement beside it when ``josh judge`` has scored the run (``judgements.jsonl``). Pages need no network: CSS and a little JavaScript are inline. All model, user and tool text is
untrusted: the templates escape everything (jinja2 autoescape) and no data is ever placed inside a script.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import webbrowser
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2
from pydantic import ValidationError

from josh.agents import protocol_named, protocols
from josh.agents.protocol import AgentProtocol, Step
from josh.eval.evaluate import load_results
from josh.eval.judge.rubric import TurnJudgement
from josh.eval.judge.runner import by_judge, latest, load_judgements
from josh.run.diagnostics import CLASS_LABELS, CallVerdict
from josh.search.tree import Node, Tree, trees_file
from josh.types import Goal
from josh.util.atomic import write_atomic
from josh.util.jsonl import iter_jsonl
from josh.util.layout import JUDGE_SUMMARY, RESULTS, TREES
from josh.util.layout import VIEW_INDEX as INDEX_FILE

VIEW_DIR = "view"

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


@dataclass
class NodeView:
    """A node with what the page shows about it, and its children (ideal child first)."""

    node: Node
    steps: list[Step]
    status: str
    goals: list[str]
    children: list[NodeView] = field(default_factory=list)


@dataclass
class IndexRow:
    """One task's line in the index; ``page`` is None when its record could not be read."""

    task_id: str
    page: str | None
    reward: float = 0.0
    max_reward: float = 0.0
    success: bool = False
    n_goals: int = 0
    nodes: int = 0
    ideal: int = 0
    llm_calls: int = 0
    tokens: int = 0
    dead: int = 0
    error: str | None = None


def protocol_of(tree: Tree) -> AgentProtocol:
    """The protocol the tree's agent wrote in. Trees written before it was recorded, and scripted agents' trees,
    carry none: then a text protocol whose results appear in the tree is taken, else ReACT (which also reads native
    tool calls)."""
    if tree.protocol is not None:
        return protocol_named(tree.protocol)
    texts = [m.content or "" for n in tree.nodes for m in n.messages if m.role == "user"]
    found = (p for p in protocols() if p.result_prefix and any(t.startswith(p.result_prefix) for t in texts))
    return next(found, protocol_named("react"))


def label_calls(steps: list[Step], verdicts: list[CallVerdict]) -> list[Step]:
    """Give the call steps their diagnostic class, pairing them in order with the calls the environment ran (a
    call step of another name, e.g. one that never ran, stays unlabelled)."""
    pending = iter(verdicts)
    verdict = next(pending, None)
    for step in steps:
        if verdict is not None and step.kind == "call" and step.name == verdict.name:
            step.verdict = CLASS_LABELS[verdict.verdict]
            step.issues = ", ".join(f"{arg} {issue.value}" for arg, issue in verdict.arguments.items())
            verdict = next(pending, None)
    return steps


def _status(node: Node, root: bool) -> str:
    if node.ideal:
        return "ideal"
    if node.partial:
        return "partial"
    if node.pruned:
        return "pruned"
    return "root" if root else "unscored"


def goal_text(goal: Goal) -> str:
    """A goal call written as ``name(slot=value, ...)``."""
    params = ", ".join(f"{k}={v}" for k, v in goal.parameters.items())
    return f"{goal.name}({params})"


def _goal_label(tree: Tree, index: int) -> str:
    name = goal_text(tree.goals[index]) if 0 <= index < len(tree.goals) else "unknown goal"
    return f"goal {index + 1}: {name}"


def build_views(tree: Tree) -> list[NodeView]:
    """The node views of ``tree`` as a forest: normally one root; a node whose parent is missing becomes a root
    too, so nothing in a damaged record is hidden. Raises ``ValueError`` for repeated ids or a parent cycle."""
    protocol = protocol_of(tree)
    views = {
        n.id: NodeView(
            node=n,
            steps=label_calls(protocol.steps(n.messages, n.reply), n.calls),
            status=_status(n, n.parent is None),
            goals=[_goal_label(tree, g) for g in n.goals],
        )
        for n in tree.nodes
    }
    if len(views) != len(tree.nodes):
        raise ValueError(f"tree {tree.task_id}: node ids repeat")
    roots: list[NodeView] = []
    for n in tree.nodes:
        parent = views.get(n.parent) if n.parent is not None else None
        (parent.children if parent else roots).append(views[n.id])
    reached, stack = 0, list(roots)
    while stack:
        view = stack.pop()
        reached += 1
        view.children.sort(key=lambda v: not v.node.ideal)
        stack.extend(view.children)
    if reached != len(views):
        raise ValueError(f"tree {tree.task_id}: node parents form a cycle")
    return roots


def _ideal_ids(roots: list[NodeView]) -> list[int]:
    """The ideal path, root first, following ideal children; empty when nothing was rewarded."""
    path: list[int] = []
    view = next((r for r in roots if r.node.ideal), None)
    while view is not None:
        path.append(view.node.id)
        view = next((c for c in view.children if c.node.ideal), None)
    return path


def _goal_rows(tree: Tree) -> list[dict[str, Any]]:
    """Each goal with the ideal node that completed it and the other nodes that reached it."""
    rows = []
    for i, goal in enumerate(tree.goals):
        reached = [n for n in tree.nodes if i in n.goals]
        rows.append(
            {
                "index": i + 1,
                "goal": goal,
                "text": goal_text(goal),
                "ideal": [n.id for n in reached if n.ideal],
                "other": [n.id for n in reached if not n.ideal],
            }
        )
    return rows


@functools.cache
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("josh.cli", "templates"),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )


def render_tree(tree: Tree, *, index_href: str | None = None) -> str:
    """The HTML page of one tree; ``ValueError`` when its nodes do not form a tree."""
    roots = build_views(tree)
    counts = {
        flag: sum(1 for n in tree.nodes if getattr(n, flag)) for flag in ("ideal", "partial", "pruned", "dead", "ended")
    }
    return (
        _environment()
        .get_template("view_tree.html.jinja")
        .render(
            tree=tree,
            roots=roots,
            ideal_path=_ideal_ids(roots),
            goals=_goal_rows(tree),
            counts=counts,
            tool_names=[str((t.get("function") or t).get("name", "?")) for t in tree.tools],
            index_href=index_href,
        )
    )


def render_index(run: str, rows: list[IndexRow]) -> str:
    """The HTML index of a run's trees."""
    return _environment().get_template("view_index.html.jinja").render(run=run, rows=rows)


def _latest_records(path: Path) -> Iterator[dict[str, Any]]:
    """The latest record of each task, in file order: a rerun's line supersedes the failed one before it (a finished
    run's file holds one per task). The file is read twice, so trees are never all held in memory."""
    last = {str(record.get("task_id")): n for n, record in enumerate(iter_jsonl(path))}
    keep = set(last.values())
    return (record for n, record in enumerate(iter_jsonl(path)) if n in keep)


def _parse(record: dict[str, Any], where: Path) -> Tree:
    try:
        return Tree.model_validate(record)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise ValueError(
            f"{where}: task {record.get('task_id')!r} is not a tree record ({loc}: {first['msg']})"
        ) from exc


def load_tree(run: str | Path, task_id: str) -> Tree:
    """The tree of ``task_id`` in a run, its latest line (read line by line); a clear ``ValueError`` when it is not
    there."""
    path = trees_file(run)
    found: dict[str, Any] | None = None
    seen: dict[str, None] = {}
    for record in iter_jsonl(path):
        if str(record.get("task_id")) == task_id:
            found = record
        seen[str(record.get("task_id"))] = None
    if found is not None:
        return _parse(found, path)
    names = list(seen)
    examples = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
    raise ValueError(f"task {task_id!r} is not in {path} ({len(names)} tasks: {examples or 'none'})")


def page_name(task_id: str) -> str:
    """A file name for a task's page, safe on every file system and distinct for distinct task ids."""
    safe = _UNSAFE.sub("_", task_id).strip("._")[:80]
    if safe == task_id and safe:
        return f"{safe}.html"
    digest = hashlib.sha1(task_id.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    return f"{safe or 'task'}-{digest}.html"


def _write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` all at once, so a reader never sees half a page."""
    write_atomic(path, text, errors="surrogateescape")


def _row(tree: Tree, page: str) -> IndexRow:
    return IndexRow(
        task_id=tree.task_id,
        page=page,
        reward=tree.reward,
        max_reward=tree.max_reward,
        success=tree.success,
        n_goals=tree.n_goals,
        nodes=len(tree.nodes),
        ideal=sum(1 for n in tree.nodes if n.ideal),
        llm_calls=tree.stats.llm_calls,
        tokens=tree.stats.prompt_tokens + tree.stats.completion_tokens,
        dead=sum(1 for n in tree.nodes if n.dead),
        error=tree.error,
    )


def write_index(run: str | Path, out: str | Path | None = None) -> tuple[Path, list[IndexRow]]:
    """Write every task's page and the index (default ``<run>/view/index.html``); returns the index path and rows.

    A record that is not a valid tree gets an index row saying why, and no page; the other tasks still render."""
    path = trees_file(run)
    index = Path(out) if out else path.parent / VIEW_DIR / INDEX_FILE
    rows: list[IndexRow] = []
    for record in _latest_records(path):
        task_id = str(record.get("task_id"))
        page = page_name(task_id)
        try:
            tree = _parse(record, path)
            html = render_tree(tree, index_href=index.name)
        except ValueError as exc:
            rows.append(IndexRow(task_id=task_id, page=None, error=f"unreadable record: {exc}"))
            continue
        _write(index.parent / page, html)
        rows.append(_row(tree, page))
    rows.sort(key=lambda r: _natural(r.task_id))
    _write(index, render_index(str(run), rows))
    return index, rows


def _natural(text: str) -> list[Any]:
    """A sort key that orders ``task_2`` before ``task_10`` (tasks finish, and are written, in any order)."""
    return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", text)]


def write_task(run: str | Path, task_id: str, out: str | Path | None = None) -> Path:
    """Write one task's page (default ``<run>/view/<task>.html``) and return its path."""
    tree = load_tree(run, task_id)
    page = Path(out) if out else trees_file(run).parent / VIEW_DIR / page_name(task_id)
    _write(page, render_tree(tree))
    return page


def open_in_browser(page: Path) -> bool:
    """Open a written page in the default browser; False when no browser could be started."""
    return webbrowser.open(page.resolve().as_uri())


def is_evaluation(run: str | Path) -> bool:
    """Whether ``run`` is an evaluation folder (conversations, no search trees)."""
    path = Path(run)
    return path.is_dir() and (path / RESULTS).is_file() and not (path / TREES).is_file()


def run_judgements(run: Path) -> tuple[str | None, dict[tuple[str, int, int], TurnJudgement]]:
    """The judge named in the run's ``judge_summary.json`` and each reply's judgement by it (empty: not judged)."""
    try:
        judge = json.loads((run / JUDGE_SUMMARY).read_text(encoding="utf-8")).get("judge")
    except (OSError, ValueError, AttributeError):
        return None, {}
    return judge, latest(by_judge(load_judgements(run), str(judge)))


def write_conversations(run: str | Path, out: str | Path | None = None) -> tuple[Path, int]:
    """An evaluation's conversation pages and their index (default ``<run>/view/index.html``), each agent reply
    with its judgement beside it; returns the index path and the number of conversations."""
    folder = Path(run)
    records = load_results(folder)
    index = Path(out) if out else folder / VIEW_DIR / INDEX_FILE
    judge, judged = run_judgements(folder)
    rows = []
    for record in sorted(records, key=lambda r: (_natural(r.task_id), r.trial)):
        page = page_name(f"{record.task_id}-trial{record.trial}")
        mine = {k[2]: j for k, j in judged.items() if k[:2] == (record.task_id, record.trial)}
        template = _environment().get_template("view_conversation.html.jinja")
        _write(index.parent / page, template.render(record=record, judge=judge, judged=mine, index_href=index.name))
        rows.append({"record": record, "page": page, "judged": mine})
    _write(
        index, _environment().get_template("view_evaluation.html.jinja").render(run=str(run), rows=rows, judge=judge)
    )
    return index, len(records)
