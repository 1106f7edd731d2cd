"""The authors' JOSH rollouts rebuilt as josh search trees (``trees.jsonl`` records).

Each ``training_paths`` entry is one node of the authors' binary tree: the full message list from the start of the
conversation to that node's agent turn (trailing user messages trimmed), ``is_successful`` (the node leads to a
leaf that earned a reward in some step) and ``is_golden_path`` (the node leads to the leaf chosen as the new root
at a collapse). The lists share their prefixes, so they are merged into a trie of agent turns: a josh node per
agent turn, with the user's reply taken from any longer list that runs through it (identical outputs of two leaves
that the user answered differently stay two nodes). Flags map as: golden → ``ideal``; successful but not golden →
``partial``; not golden → ``pruned`` (every dumped node not on the golden path was discarded at that collapse).

The authors' writer generated one command at a time; the assistant messages up to a result are read as one josh
output with josh's ReACT parser and logged as josh logs them (the part acted on); results stay as the model saw
them. Tool errors come from what the authors' environment answered; an output josh reads otherwise than the
authors' code did is ``malformed``. The authors' ``system`` message "Error: Agent ran out of retries." (a turn that
never spoke) is left out; such a turn carries ``no_reply``. The records keep no partial reward: a tree is stored
with reward 1.0 when ``100_percent_reached``, else 0.0.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from josh.agents.react import END_MARKER, RESULT_PREFIX, ReactProtocol
from josh.core.agent import PromptFrame
from josh.core.llm import Completion
from josh.envs.toolwoz.schema import TOOLS
from josh.harvest.paper_archive import PaperMessage, PaperRollout
from josh.search.tree import Node, Tree, TreeStats
from josh.types import ErrorCategory, Message, assistant, user

REACT = ReactProtocol()
AUTHORS_COMMAND = re.compile(r"(PLAN|APICALL|SPEAK)(.*?)(?=PLAN|APICALL|SPEAK|$)", re.DOTALL)
AUTHORS_JSON = re.compile(r"\{.*\}")
OUT_OF_TRIES = "system"
AGENT_SIDE = ("assistant", OUT_OF_TRIES)
RESULT_ERRORS = {
    '"ERROR: INVALID API CALL! YOUR REQUEST CONTAINED PARAMETERS': ErrorCategory.UNKNOWN_ARGUMENT,
    '"ERROR: INVALID API CALL! LISTS AND DICTS': ErrorCategory.INVALID_VALUE,
    '"ERROR: INVALID API CALL!"': ErrorCategory.UNKNOWN_TOOL,
    '"FAILURE INCORRECTLY FORMATTED APICALL"': ErrorCategory.MALFORMED,
}


class ConvertStats(BaseModel):
    """What the conversion read and how it read it."""

    conversations: int = 0
    reached_100: int = 0
    training_paths: int = 0
    nodes: int = 0
    outputs: int = 0
    calls: int = 0
    read_differently: int = 0
    spoke_before_result: int = 0
    error_turns: int = 0


@dataclass
class _Turn:
    """A node while the trie is built."""

    id: int
    parent: int | None
    depth: int
    key: tuple[tuple[str, str], ...]
    reply_to: str | None = None
    successful: bool = False
    golden: bool = False
    children: list[int] = field(default_factory=list)


def _is_result(message: PaperMessage) -> bool:
    return message.role == "user" and message.content.startswith(RESULT_PREFIX)


def _units(messages: Sequence[PaperMessage]) -> tuple[str | None, list[tuple[tuple[tuple[str, str], ...], str | None]]]:
    """The opening user utterance, then (agent turn, the user's reply or None) for every agent turn."""
    i = 0
    opening: list[str] = []
    while i < len(messages) and messages[i].role == "user" and not _is_result(messages[i]):
        opening.append(messages[i].content)
        i += 1
    turns: list[tuple[tuple[tuple[str, str], ...], str | None]] = []
    while i < len(messages):
        turn: list[tuple[str, str]] = []
        while i < len(messages) and (messages[i].role in AGENT_SIDE or _is_result(messages[i])):
            turn.append((messages[i].role, messages[i].content))
            i += 1
        reply: list[str] = []
        while i < len(messages) and messages[i].role == "user" and not _is_result(messages[i]):
            reply.append(messages[i].content)
            i += 1
        if not turn:
            raise ValueError(f"a message of role {messages[i].role!r} where an agent turn was expected")
        turns.append((tuple(turn), "\n".join(reply) if reply else None))
    return ("\n".join(opening) if opening else None), turns


def _same(node: _Turn, key: tuple[tuple[str, str], ...], reply: str | None) -> bool:
    """Whether a turn is ``node``: the same agent messages, and no other user reply (identical outputs of two
    leaves that the user answered differently are two nodes)."""
    return node.key == key and (reply is None or node.reply_to is None or node.reply_to == reply)


def _trie(rollout: PaperRollout) -> tuple[str | None, list[_Turn]]:
    """The authors' node lists merged into one trie of agent turns (node 0 is the root)."""
    nodes = [_Turn(0, None, 0, ())]
    opening: str | None = None
    for messages, successful, golden in rollout.training_paths:
        head, turns = _units(messages)
        opening = opening or head
        current = nodes[0]
        for key, reply in turns:
            found = next((nodes[c] for c in current.children if _same(nodes[c], key, reply)), None)
            if found is None:
                found = _Turn(len(nodes), current.id, current.depth + 1, key)
                nodes.append(found)
                current.children.append(found.id)
            found.reply_to = found.reply_to or reply
            current = found
        current.successful |= successful
        current.golden |= golden
    return opening, nodes


def _outputs(key: Sequence[tuple[str, str]]) -> list[tuple[str, list[str]]]:
    """A turn as josh outputs: the assistant messages up to the next result joined into one output, with the
    results that answered it (the authors generated one command at a time; josh reads them as one output)."""
    outputs: list[tuple[str, list[str]]] = []
    for role, content in key:
        if role == OUT_OF_TRIES:
            continue
        if role == "assistant" and outputs and not outputs[-1][1]:
            outputs[-1] = (f"{outputs[-1][0]} {content}", [])
        elif role == "assistant" or not outputs:
            outputs.append((content if role == "assistant" else "", []))
        if role == "user":
            outputs[-1][1].append(content[len(RESULT_PREFIX) :].strip())
    return outputs


def authors_calls(text: str) -> list[tuple[Any, Any] | None]:
    """The calls the authors' agent read from an output, as its code read them: end markers, newlines and
    backslashes removed, split at PLAN / APICALL / SPEAK, the widest ``{...}`` of each APICALL parsed as JSON."""
    flat = text.replace(END_MARKER, "").strip().replace("\n", "").replace("\\", "")
    calls: list[tuple[Any, Any] | None] = []
    for kind, body in AUTHORS_COMMAND.findall(flat):
        if kind != "APICALL":
            continue
        found = AUTHORS_JSON.search(body)
        try:
            obj = json.loads(found.group(0)) if found else None
        except (json.JSONDecodeError, RecursionError):
            obj = None
        calls.append((obj.get("name"), obj.get("parameters")) if isinstance(obj, dict) else None)
    return calls


def _result_error(result: str, name: str) -> ErrorCategory | None:
    """The error category of one call, from what the authors' environment answered."""
    for prefix, category in RESULT_ERRORS.items():
        if result.startswith(prefix):
            return ErrorCategory.UNKNOWN_TOOL if category is ErrorCategory.MALFORMED and name not in TOOLS else category
    return None


def _read(text: str, results: list[str], stats: ConvertStats) -> tuple[list[Message], list[ErrorCategory], str | None]:
    """One output as josh logs it (its results as one josh result message), its errors and its spoken reply."""
    stats.outputs += 1
    parsed = REACT.parse(Completion(text=text))
    if not results:
        if parsed.reply is not None and not parsed.calls:
            return [REACT.action_message(parsed)], [], parsed.reply
        stats.read_differently += bool(parsed.calls)
        return [assistant(text)], [ErrorCategory.MALFORMED], None
    stats.calls += len(results)
    stats.spoke_before_result += "SPEAK" in parsed.dropped
    answered = [user("\n".join(f"{RESULT_PREFIX} {r}" for r in results))]
    mine = [(c.call.name, c.call.arguments) if c.ok else None for c in parsed.calls]
    if mine != authors_calls(text)[: len(results)] or len(mine) != len(results):
        stats.read_differently += 1
        return [assistant(text), *answered], [ErrorCategory.MALFORMED], None
    errors = [e for c, r in zip(parsed.calls, results, strict=True) if (e := _result_error(r, c.call.name))]
    return [REACT.action_message(parsed), *answered], errors, None


def _node(turn: _Turn, stats: ConvertStats) -> Node:
    """One josh node from one agent turn: messages as josh logs them, errors, the spoken reply."""
    messages: list[Message] = []
    errors: list[ErrorCategory] = []
    reply: str | None = None
    for text, results in _outputs(turn.key):
        logged, found, spoken = _read(text, results, stats)
        messages += logged
        errors += found
        reply = spoken or reply
    if reply is None:
        errors.append(ErrorCategory.NO_REPLY)
    stats.error_turns += bool(errors)
    return Node(
        id=turn.id, parent=turn.parent, depth=turn.depth, messages=messages, reply=reply, user=turn.reply_to,
        errors=sorted(set(errors), key=list(ErrorCategory).index), ideal=turn.golden,
        partial=turn.successful and not turn.golden, pruned=not turn.golden,
    )  # fmt: skip


def rollout_tree(rollout: PaperRollout, frame: PromptFrame, stats: ConvertStats) -> Tree:
    """One authors' rollout as a josh search tree under ``frame`` (the josh ReACT agent's system prompt)."""
    try:
        opening, turns = _trie(rollout)
    except ValueError as exc:
        raise ValueError(f"sim_{rollout.dialogue_id}.json: {exc}") from None
    stats.conversations += 1
    stats.reached_100 += rollout.reached_100
    stats.training_paths += len(rollout.training_paths)
    root = Node(id=0, user=opening, ideal=turns[0].golden)
    nodes = [root, *(_node(t, stats) for t in turns[1:])]
    stats.nodes += len(nodes)
    reward = 1.0 if rollout.reached_100 else 0.0
    return Tree(
        task_id=rollout.dialogue_id, reward=reward, max_reward=reward, success=rollout.reached_100,
        system=frame.system, preamble=frame.preamble, tools=frame.tools, protocol=frame.protocol,
        config={"source": "josh-train 0.1.4 llama3-josh-toolwoz-for-KTO.zip (Llama-3-8B)"},
        nodes=nodes, stats=TreeStats(nodes=len(nodes), errors=sum(1 for n in nodes if n.errors)),
    )  # fmt: skip
