"""``josh view``: tree pages and the run index, built from real JOSH searches (oracle agent with noise, agenda user)
on the mini ToolWOZ set; escaping of untrusted text; rendering in headless Chromium."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from josh.agents import make_agent, protocol_named
from josh.cli.main import app
from josh.cli.view import (
    build_views,
    load_tree,
    page_name,
    protocol_of,
    render_tree,
    write_index,
    write_task,
)
from josh.llm.scripted import ScriptedLLM
from josh.run.components import build_env
from josh.search.algorithm import SearchConfig, search
from josh.search.tree import Node, Tree
from josh.types import ErrorCategory, ToolCall, assistant, tool_result, user
from josh.users import make_user

SYSTEM = "You are the Cambridge booking agent."
SCRIPT = "<script>document.body.setAttribute('data-pwned', 'script')</script>"
IMG = "<img src=x onerror=\"document.body.setAttribute('data-pwned', 'img')\">"
BREAKOUT = "</pre></details></article></li></ul>" + SCRIPT


class Page(HTMLParser):
    """The parts of a page the tests look at: each node card's text, badges and classes, in document order."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.order: list[int] = []
        self.text: dict[int, str] = {}
        self.classes: dict[int, set[str]] = {}
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts = 0
        self.badges: dict[int, list[str]] = {}
        self._card: int | None = None
        self._badge: list[str] | None = None
        self.feed(html)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self.tags.append((tag, a))
        self.scripts += tag == "script"
        if tag == "li" and a.get("data-node") is not None:
            self.classes[int(a["data-node"])] = set((a.get("class") or "").split())
        if tag == "article" and a.get("data-node") is not None:
            self._card = int(a["data-node"])
            self.order.append(self._card)
            self.text[self._card] = ""
        if tag == "span" and self._card is not None and "badge" in (a.get("class") or ""):
            self._badge = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "article":
            self._card = None
        if tag == "span" and self._badge is not None and self._card is not None:
            self.badges.setdefault(self._card, []).append("".join(self._badge))
            self._badge = None

    def handle_data(self, data: str) -> None:
        if self._card is not None:
            self.text[self._card] += data
        if self._badge is not None:
            self._badge.append(data)


def _search_trees() -> list[Tree]:
    env = build_env("toolwoz", "mini")
    agent = make_agent("oracle", env, None, noise=0.4, seed=1)
    user_sim = make_user("agenda")

    async def run() -> list[Tree]:
        trees = [await search(t, env, agent, user_sim, SearchConfig()) for t in env.tasks("test")[:6]]
        return [tree.model_copy(update={"system": SYSTEM}) for tree in trees]  # the oracle has no prompt of its own

    return asyncio.run(run())


@pytest.fixture(scope="module")
def trees() -> list[Tree]:
    return _search_trees()


@pytest.fixture(scope="module")
def rich(trees: list[Tree]) -> Tree:
    """A real tree with ideal, partial-credit and pruned nodes."""
    found = [t for t in trees if all(any(getattr(n, f) for n in t.nodes) for f in ("ideal", "partial", "pruned"))]
    assert found, "the noisy oracle search should give a tree with ideal, partial and pruned nodes"
    return found[0]


def _hostile(tree: Tree) -> Tree:
    """``tree`` with markup in every place untrusted text can reach, and a node in ReACT text form."""
    bad = tree.model_copy(deep=True)
    bad.task_id = f"{tree.task_id}/</title>{SCRIPT}"
    bad.system = f"system {SCRIPT}"
    ideal = [n for n in bad.nodes if n.ideal and n.parent is not None]
    first, last = ideal[0], ideal[-1]
    first.reply = f"reply {SCRIPT}{IMG}"
    first.user = f"user {BREAKOUT}"
    call = ToolCall(name=f"search{IMG}", arguments={"area": SCRIPT})
    first.messages = [assistant(calls=[call]), tool_result(call.id, f"result {BREAKOUT}"), assistant(first.reply)]
    last.messages = [
        assistant(
            'PLAN look it up <COMMAND_END>\nAPICALL {"name": "search_attraction", "parameters": {}} <COMMAND_END>'
        ),
        user(f"APIRETURN [{json.dumps({'name': SCRIPT})}]"),
        assistant(f"SPEAK {SCRIPT} <COMMAND_END>"),
    ]
    last.reply = SCRIPT
    last.errors = [ErrorCategory.MALFORMED]
    return bad


def goal_args(tree: Tree, g: int) -> str:
    return ", ".join(f"{k}={v}" for k, v in tree.goals[g].parameters.items())


def test_ideal_path_is_shown_in_order_and_marked(rich: Tree) -> None:
    html = render_tree(rich)
    page = Page(html)
    path = rich.ideal_path()
    assert len(path) >= 3
    summary = re.search(r'<p class="path">(.*?)</p>', html, re.DOTALL)
    assert summary and re.findall(r'href="#n(\d+)"', summary.group(1)) == [str(n.id) for n in path]
    positions = [page.order.index(n.id) for n in path]
    assert positions == sorted(positions)
    for node in path:
        assert "ideal" in page.classes[node.id]
        assert "IDEAL" in page.text[node.id]
        for said in (node.user, node.reply):
            if said is not None:
                assert said in page.text[node.id]


def test_every_node_carries_its_flags_as_class_and_label(rich: Tree) -> None:
    page = Page(render_tree(rich))
    assert sorted(page.order) == [n.id for n in rich.nodes]
    labels = {"ideal": "IDEAL", "partial": "PARTIAL CREDIT", "pruned": "PRUNED", "dead": "DEAD", "ended": "ENDED"}
    for node in rich.nodes:
        for flag, label in labels.items():
            assert (flag in page.classes[node.id]) == getattr(node, flag), (node.id, flag)
            assert (label in page.badges[node.id]) == getattr(node, flag), (node.id, label)
        goals = [b for b in page.badges[node.id] if "goal" in b]
        assert goals == [f"\u2713 goal {g + 1}: {rich.goals[g].name}(" + goal_args(rich, g) + ")" for g in node.goals]
        assert f"agent LLM calls {node.llm_calls}" in page.text[node.id]


def test_tool_calls_fold_out_with_their_results(rich: Tree) -> None:
    html = render_tree(rich)
    calls = [c for n in rich.nodes for m in n.messages for c in m.tool_calls or ()]
    assert calls
    assert html.count('<details class="call step">') == len(calls)
    assert "no result" not in html
    assert f'<pre id="system-prompt">{SYSTEM}</pre>' in html


def test_untrusted_text_is_escaped_everywhere(rich: Tree) -> None:
    html = render_tree(_hostile(rich))
    page = Page(html)
    assert page.scripts == 1
    assert not any(k.startswith("on") for _, attrs in page.tags for k in attrs)
    assert not any(tag == "img" for tag, _ in page.tags)
    assert "&lt;script&gt;" in html
    assert f"user {BREAKOUT}" in "".join(page.text.values())
    assert all("src" not in attrs for _, attrs in page.tags)
    hrefs = [a["href"] for tag, a in page.tags if tag == "a" and "href" in a]
    assert hrefs and all(h.startswith("#") for h in hrefs)


def test_react_text_is_split_into_commands_with_results_paired() -> None:
    messages = [
        assistant(
            'PLAN find it <COMMAND_END>\nAPICALL {"name": "search_hotel", "parameters": {"area": "north"}} <COMMAND_END>'
        ),
        user('APIRETURN [{"name": "acorn"}]'),
        user("FEEDBACK your last output could not be used: no command."),
        assistant("SPEAK Acorn is free. <COMMAND_END>"),
    ]
    steps = protocol_named("react").steps(messages, "Acorn is free.")
    assert [s.kind for s in steps] == ["plan", "call", "feedback", "speak"]
    assert steps[1].name == "search_hotel" and json.loads(steps[1].arguments) == {"area": "north"}
    assert json.loads(steps[1].result or "") == [{"name": "acorn"}]
    assert steps[3].body == "Acorn is free."


def test_unpaired_results_and_unreadable_calls_are_still_shown() -> None:
    messages = [
        assistant("APICALL not json <COMMAND_END>\nAPICALL {} <COMMAND_END>"),
        user("APIRETURN one line only"),
        tool_result("call_unknown", "orphan"),
    ]
    steps = protocol_named("react").steps(messages, None)
    assert [s.kind for s in steps] == ["call", "call", "result", "result"]
    assert steps[0].name == "" and steps[0].arguments == "not json"
    assert [s.body for s in steps[2:]] == ["APIRETURN one line only", "orphan"]


ACT_TURN = [
    assistant('Action: {"name": "search_hotel", "arguments": {"area": "north"}}'),
    user('Observation: [{"name": "acorn"}]'),
    assistant('Action: {"name": "respond", "arguments": {"content": "Acorn is free."}}'),
]


def test_act_actions_are_calls_paired_with_their_observations() -> None:
    steps = protocol_named("act").steps(ACT_TURN, "Acorn is free.")
    assert [s.kind for s in steps] == ["call", "speak"]
    assert steps[0].name == "search_hotel" and json.loads(steps[0].arguments) == {"area": "north"}
    assert json.loads(steps[0].result or "") == [{"name": "acorn"}]
    assert steps[1].body == "Acorn is free."


async def test_the_tree_names_its_protocol_and_the_page_pairs_act_results() -> None:
    env = build_env("toolwoz", "mini")
    replies = [ACT_TURN[0].content, ACT_TURN[2].content]
    agent = make_agent("act", env, ScriptedLLM(lambda messages, tools, index: replies[len(messages) % 2]))
    tree = await search(env.tasks("test")[0], env, agent, make_user("agenda"), SearchConfig(max_depth=1))
    assert tree.protocol == "act" and tree.nodes[1].messages[1].content.startswith("Observation:")
    steps = [s for view in build_views(tree)[0].children for s in view.steps]
    assert steps and all(s.kind != "result" for s in steps)
    assert any(s.kind == "call" and s.result for s in steps)


def test_trees_without_a_protocol_are_read_by_the_results_they_hold() -> None:
    node = Node(id=1, parent=0, depth=1, messages=ACT_TURN, reply="Acorn is free.")
    old = Tree(task_id="t", nodes=[Node(id=0, user="hi"), node])
    assert protocol_of(old).name == "act"
    assert protocol_of(Tree(task_id="t", nodes=[Node(id=0, user="hi")])).name == "react"


_MARKUP = st.sampled_from(["<", ">", "&", '"', "'", "/", "=", " ", "b", "script", "&lt;", "-->"])
_TEXT = st.lists(st.one_of(_MARKUP, st.characters(blacklist_categories=("Cs",))), max_size=30).map("".join)


@settings(max_examples=60, deadline=None)
@given(reply=_TEXT, said=_TEXT, result=_TEXT)
def test_any_text_comes_back_verbatim_and_adds_no_markup(reply: str, said: str, result: str) -> None:
    call = ToolCall(name="search_hotel", arguments={"q": said})
    node = Node(
        id=1,
        parent=0,
        depth=1,
        messages=[assistant(calls=[call]), tool_result(call.id, f"r{result}"), assistant(reply)],
        reply=reply,
        user=said,
        ideal=True,
    )
    tree = Tree(task_id="t", nodes=[Node(id=0, user="hi", ideal=True), node])
    plain = tree.model_copy(deep=True)
    plain.nodes[1] = node.model_copy(
        update={
            "messages": [assistant(calls=[call]), tool_result(call.id, "rb"), assistant("c")],
            "reply": "c",
            "user": "d",
        }
    )
    page = Page(render_tree(tree))
    assert [t for t, _ in page.tags] == [t for t, _ in Page(render_tree(plain)).tags]
    for text in (reply, said, f"r{result}"):
        assert text in page.text[1]


def test_damaged_and_empty_trees_render() -> None:
    orphan = Tree(task_id="d", nodes=[Node(id=0, user="hi"), Node(id=1, parent=7, reply="lost parent", dead=True)])
    page = Page(render_tree(orphan))
    assert page.order == [0, 1] and "lost parent" in page.text[1] and "dead" in page.classes[1]
    empty = render_tree(Tree(task_id="e", error="task has no goals: nothing to reward"))
    assert "nothing to reward" in empty and "not searched" in empty
    cycle = Tree(task_id="c", nodes=[Node(id=0), Node(id=1, parent=2), Node(id=2, parent=1)])
    with pytest.raises(ValueError, match="cycle"):
        render_tree(cycle)
    with pytest.raises(ValueError, match="repeat"):
        render_tree(Tree(task_id="r", nodes=[Node(id=0), Node(id=0)]))


def _run(tmp_path: Path, trees: list[Tree], extra: list[str] = ()) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    lines = [t.model_dump_json() for t in trees] + list(extra)
    (run / "trees.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return run


def test_index_links_every_task_and_reports_unreadable_records(tmp_path: Path, trees: list[Tree]) -> None:
    weird = trees[0].model_copy(update={"task_id": "../a b/<c>"})
    broken = json.dumps({"task_id": "broken", "nodes": "not a list"})
    cycle = Tree(task_id="cycle", nodes=[Node(id=0), Node(id=1, parent=1)]).model_dump_json()
    run = _run(tmp_path, [*trees, weird], [broken, cycle])
    index, rows = write_index(run)
    assert index == run / "view" / "index.html"
    ids = sorted(t.task_id for t in trees)  # mini_test_NNNN: natural order is plain order
    assert [r.task_id for r in rows] == ["../a b/<c>", "broken", "cycle", *ids]
    by_error = {r.task_id: r for r in rows if r.page is None}
    assert "unreadable record" in (by_error["broken"].error or "") and "cycle" in (by_error["cycle"].error or "")
    first = next(r for r in rows if r.task_id == trees[0].task_id)
    page = Page(index.read_text())
    hrefs = [a["href"] for tag, a in page.tags if tag == "a"]
    assert len(hrefs) == len(trees) + 1
    for href in hrefs:
        assert (index.parent / href).resolve().parent == index.parent.resolve()
        assert "IDEAL" in (index.parent / href).read_text()
    assert "&lt;c&gt;" in index.read_text()
    assert first.reward == trees[0].reward and first.nodes == len(trees[0].nodes)


def test_a_tasks_latest_line_is_its_tree_in_the_index_and_on_its_page(tmp_path: Path, trees: list[Tree]) -> None:
    """A streamed file of an unfinished run: a failed tree, then the rerun's tree that supersedes it."""
    failed = trees[1].model_copy(update={"failed": "llm_error: Connection error.", "reward": 0.0})
    run = _run(tmp_path, [failed, *trees])
    _, rows = write_index(run)
    assert sorted(r.task_id for r in rows) == sorted(t.task_id for t in trees)
    row = next(r for r in rows if r.task_id == trees[1].task_id)
    assert row.page is not None and row.error is None and row.reward == trees[1].reward
    assert load_tree(run, trees[1].task_id) == trees[1]


def test_index_lists_tasks_in_natural_order_whatever_order_they_finished(tmp_path: Path, trees: list[Tree]) -> None:
    renamed = [t.model_copy(update={"task_id": f"task_{n}"}) for t, n in zip(trees, (10, 2, 1, 33, 4), strict=False)]
    _, rows = write_index(_run(tmp_path, renamed))
    numbers = [int(r.task_id.split("_")[1]) for r in rows]
    assert numbers == sorted(numbers) and len(numbers) == len(renamed)


def test_a_text_protocol_tree_says_where_its_tools_are(rich: Tree) -> None:
    html = render_tree(rich.model_copy(update={"tools": []}))
    assert "Tools offered" not in html and "describes them in the system prompt" in html
    assert "Tools offered (" in render_tree(rich)


def test_index_totals_count_readable_trees_only(tmp_path: Path, trees: list[Tree]) -> None:
    index, _ = write_index(_run(tmp_path, trees, ['{"task_id": "x", "reward": "high"}']))
    html = index.read_text()
    mean = sum(t.reward for t in trees) / len(trees)
    assert f"mean reward {mean:.3f}" in html
    assert f"{sum(t.success for t in trees)} reached every goal" in html


def test_page_names_are_safe_and_distinct() -> None:
    ids = ["a", "a/b", "a_b", "../x", "", "é", "a" * 200, "a.html"]
    names = [page_name(i) for i in ids]
    assert len(set(names)) == len(names)
    assert all("/" not in n and not n.startswith(".") and len(n) < 110 for n in names)


def test_load_tree_errors_are_clear(tmp_path: Path, trees: list[Tree]) -> None:
    run = _run(tmp_path, trees)
    assert load_tree(run / "trees.jsonl", trees[2].task_id) == trees[2]
    with pytest.raises(ValueError, match="'missing' is not in .*6 tasks"):
        load_tree(run, "missing")
    with pytest.raises(ValueError, match="no trees.jsonl"):
        load_tree(tmp_path / "nowhere", "x")
    (run / "trees.jsonl").write_text("{bad\n" + trees[0].model_dump_json() + "\n")
    with pytest.raises(ValueError, match="line 1 is not valid JSON"):
        write_index(run)


def test_cli_writes_a_task_page_and_the_index(tmp_path: Path, trees: list[Tree]) -> None:
    run = _run(tmp_path, trees)
    out = tmp_path / "pages" / "one.html"
    result = CliRunner().invoke(app, ["view", str(run), "--task", trees[1].task_id, "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert sorted(Page(out.read_text()).order) == [n.id for n in trees[1].nodes]
    result = CliRunner().invoke(app, ["view", str(run)])
    assert result.exit_code == 0 and "6 tasks (0 unreadable)" in result.output
    assert (run / "view" / page_name(trees[0].task_id)).is_file()
    missing = CliRunner().invoke(app, ["view", str(run), "--task", "nope"])
    assert missing.exit_code == 2 and "'nope' is not in" in missing.output


def _chromium(*args: str, profile: Path) -> subprocess.CompletedProcess[str]:
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run"]
    flags += ["--disable-background-networking", "--disable-component-update", "--disable-sync"]
    return subprocess.run(
        ["chromium", *flags, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )


@pytest.mark.skipif(
    shutil.which("chromium") is None and not os.environ.get("CI"),
    reason="Debian's chromium is not installed (apt-get install chromium); on CI it is required",
)
def test_page_renders_in_headless_chromium_and_no_model_script_runs(tmp_path: Path, rich: Tree) -> None:
    hostile = _hostile(rich)
    page = write_task(_run(tmp_path, [hostile]), hostile.task_id, tmp_path / "tree.html")
    dom = _chromium("--dump-dom", page.as_uri(), profile=tmp_path / "profile").stdout
    rendered = Page(dom)
    body = next(attrs for tag, attrs in rendered.tags if tag == "body")
    assert body.get("data-ready") == "1"
    assert "data-pwned" not in body
    ideal = [n.id for n in hostile.nodes if n.ideal]
    assert sorted(i for i, c in rendered.classes.items() if "ideal" in c) == ideal
    counts = {f: sum(getattr(n, f) for n in hostile.nodes) for f in ("ideal", "partial", "pruned")}
    assert (
        f"{len(hostile.nodes)} nodes shown: {counts['ideal']} ideal, {counts['partial']} partial, "
        f"{counts['pruned']} pruned" in dom
    )
    assert sum(1 for tag, a in rendered.tags if tag == "button" and a.get("class") == "fold") > 0
    assert rendered.scripts == 1
    assert "&lt;script&gt;document.body.setAttribute" in dom
