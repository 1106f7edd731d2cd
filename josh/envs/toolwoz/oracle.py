"""A scripted oracle agent for ToolWOZ: it knows the task's goals and makes the goal calls, without any LLM.

It is the reference upper bound and the driver for tests, benchmarks and warm-start data. It only acts on a domain
once the user has mentioned it (the domain the user mentioned last is the one it works on), so the dialogue reads
naturally:

- search: when a detail of the goal's constraints was never said by the user it asks for it once; then it searches
  with exactly the goal constraints (while the user still holds to its ``fail_info`` values it searches with those,
  which the environment answers with nothing, and reports that there is no match);
- booking: once the user asks to book it books with the goal slots (``fail_book`` ones while the user holds to
  them) plus the entity the search returned, and reports the reference number;
- requested attributes (phone, postcode, ...) are answered from the found row.

Tool calls are OpenAI function-calling messages (an assistant message with ``tool_calls``, then a ``tool`` result),
run on a fork of the caller's state. ``reveal_only=True`` uses only values the user actually said (the latest
mention among the task's own values and the tool enums) — a non-cheating scripted baseline.

``noise`` is the probability that a goal call drops one argument (a random search constraint or booking slot),
drawn from a generator seeded by ``seed``, the task id, the history length and the sibling index: the ``n``
siblings of one ``turn`` call can then differ, and the same call always gives the same turns.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from josh.core.agent import AgentTurn, PromptFrame
from josh.core.env import ConversationState, Env
from josh.envs.toolwoz.normalize import is_no_constraint, normalize, plain_text
from josh.envs.toolwoz.oracle_text import (
    BOOK_OFFER,
    DOMAIN_WORDS,
    RETRY,
    answers,
    ask,
    describe,
    questions,
    requested,
    summary,
)
from josh.envs.toolwoz.task import BOOK_SLOTS, ENTITY_KEY, DomainGoal, ToolWOZDetails, details_of
from josh.registry import entry
from josh.types import Message, Task, ToolCall, assistant, call_id, tool_result

_BOOKING_WORDS = re.compile(r"\bbook|\breserv")
_YES_NO_SLOTS = {"parking": r"parking", "internet": r"internet|wi-?fi"}
_NEGATION = re.compile(r"\b(without|no|dont need|do not need|not needed|dont want)\b")
_UNITS = {"stars": r"\s*-?\s*stars?\b", "stay": r"\s*(nights?|days?)\b"}


def _whole(needle: str, text: str, unit: str = "") -> Iterator[re.Match[str]]:
    """Mentions of ``needle`` as a whole phrase in ``text`` (followed by the pattern ``unit`` when given)."""
    return re.finditer(rf"(?<![a-z0-9]){re.escape(needle)}(?![a-z0-9])" + (f"(?={unit})" if unit else ""), text)


def _clean(slots: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in slots.items() if not is_no_constraint(v)}


class UserView:
    """What the user has said so far: its utterances as one normalised text, and where each value last appears.

    Value lookups only see text from ``floor`` on (set to where the current domain's talk began), so a value the
    user gave for an earlier domain does not count for the current one.
    """

    def __init__(self, history: Sequence[Message], details: ToolWOZDetails) -> None:
        self.starts: list[int] = []
        parts: list[str] = []
        offset = 0
        for message in history:
            if message.role == "user" and message.content:
                self.starts.append(offset)
                parts.append(plain_text(message.content))
                offset += len(parts[-1]) + 1
        self.text = "\n".join(parts)
        self.latest = parts[-1] if parts else ""
        self.names = {
            domain: [
                plain_text(v)
                for key in ("name", "departure", "destination")
                for v in (spec.info.get(key), spec.fail_info.get(key))
                if v and not is_no_constraint(v)
            ]
            for domain, spec in details.goal.items()
        }
        self.floor = 0

    def last(self, value: str, *, unit: str = "", outside: Sequence[str] = ()) -> int:
        """Offset of the last mention of ``value`` as a whole phrase (followed by ``unit`` when given, and not
        part of a mention of a phrase in ``outside``: ``european`` inside ``northern european``), or -1."""
        needle = plain_text(value)
        if not needle:
            return -1
        covered = [m.span() for phrase in outside if plain_text(phrase) for m in _whole(plain_text(phrase), self.text)]
        found = -1
        for match in _whole(needle, self.text, unit):
            inside = any(start <= match.start() and match.end() <= end for start, end in covered)
            found = match.start() if match.start() >= self.floor and not inside else found
        return found

    def yes_no(self, slot: str) -> list[tuple[int, str]]:
        """Each mention of a yes/no slot with the value it states: ``without free parking`` → ``no``."""
        said = []
        for match in re.finditer(_YES_NO_SLOTS[slot], self.text[self.floor :]):
            at = match.start() + self.floor
            clause = re.split(r"[.,;!?\n]|\band\b|\bbut\b", self.text[max(self.floor, at - 40) : at])[-1]
            said.append((at, "no" if _NEGATION.search(clause) else "yes"))
        return said

    def slot_mention(self, slot: str, value: str, outside: Sequence[str] = ()) -> int:
        """Offset of the last mention of a slot value (yes/no slots: of a phrase stating that value; star ratings
        and stays: of the number with its unit, so ``5 people`` is no 5-star request)."""
        if slot in _YES_NO_SLOTS:
            wanted = normalize(value)
            return max((at for at, said in self.yes_no(slot) if not wanted or said == wanted), default=-1)
        return self.last(value, unit=_UNITS.get(slot, ""), outside=outside)

    def masked(self, domain: str) -> str:
        """The text with the other domains' names and stations blanked (a restaurant called "... hotel ...")."""
        text = self.text
        for other, names in self.names.items():
            for name in names if other != domain else ():
                text = re.sub(rf"(?<![a-z0-9]){re.escape(name)}(?![a-z0-9])", " " * len(name), text)
        return text

    def focus(self, domains: Sequence[str]) -> tuple[str | None, int]:
        """The domain the user mentioned last, and the offset of its first mention."""
        best: tuple[str | None, int, int] = (None, -1, -1)
        for domain in domains:
            hits = [m.start() for m in re.finditer(DOMAIN_WORDS.get(domain, domain), self.masked(domain))]
            if hits and hits[-1] > best[1]:
                best = (domain, hits[-1], hits[0])
        return best[0], best[2]

    def utterance_index(self, offset: int) -> int:
        """Which user utterance an offset falls in."""
        return max(i for i, start in enumerate(self.starts) if start <= offset) if self.starts else 0


def _holds_to_fail(view: UserView, base: dict[str, str], fail: dict[str, str]) -> bool:
    """Whether the user currently holds to some ``fail`` value (mentioned after the ``base`` value it replaces;
    a mention of one inside a mention of the other counts for the longer one only)."""
    return any(
        key in base
        and normalize(base[key]) != normalize(value)
        and view.slot_mention(key, value, [base[key]]) > view.slot_mention(key, base[key], [value])
        for key, value in fail.items()
    )


def _row_of(history: Sequence[Message], name: str) -> dict[str, Any] | None:
    """The row the last non-empty ``name`` call returned in the history."""
    calls: dict[str, str] = {}
    row: dict[str, Any] | None = None
    for message in history:
        for call in message.tool_calls or ():
            calls[call.id] = call.name
        if message.role == "tool" and calls.get(message.tool_call_id or "") == name:
            try:
                data = json.loads(message.content or "")
            except json.JSONDecodeError:
                continue
            if isinstance(data, list) and data and isinstance(data[0], dict):
                row = data[0]
    return row


class OracleAgent:
    """Scripted ToolWOZ agent that knows the goals (see the module docstring)."""

    def __init__(
        self, env: Env, llm: object = None, *, reveal_only: bool = False, noise: float = 0.0, seed: int = 0
    ) -> None:
        if not 0.0 <= noise <= 1.0:
            raise ValueError(f"noise must be a probability in [0, 1], got {noise}")
        self.env, self.reveal_only, self.noise, self.seed = env, reveal_only, noise, seed
        self.enums = {
            t["function"]["name"]: {
                k: tuple(p.get("enum") or ()) for k, p in t["function"]["parameters"]["properties"].items()
            }
            for t in env.tools
        }

    def frame(self, task: Task) -> PromptFrame:
        """No prompt: the model-free agent is framed by the environment's tools only."""
        return PromptFrame(tools=list(self.env.tools))

    async def turn(self, history: list[Message], state: ConversationState, *, n: int = 1) -> list[AgentTurn]:
        """``n`` turns of the same policy, each on its own fork of ``state``; on a worker thread where the
        environment's calls block on I/O (``blocking``: an OpenEnv server), so other conversations go on."""
        if self.env.blocking:
            return [await asyncio.to_thread(self.play, history, state, sibling=k) for k in range(n)]
        return [self.play(history, state, sibling=k) for k in range(n)]

    def play(self, history: Sequence[Message], state: ConversationState, *, sibling: int = 0) -> AgentTurn:
        """One turn: the goal calls the conversation is ready for, then a reply to the user."""
        if state.task.env != "toolwoz":
            raise ValueError(f"the oracle agent plays ToolWOZ tasks only; task {state.task.id!r} is {state.task.env!r}")
        rng = random.Random(f"{self.seed}|{state.task.id}|{len(history)}|{sibling}")
        return _Turn(self, history, state.fork(), rng).run()


class _Turn:
    """Building one oracle turn on a fork."""

    def __init__(self, agent: OracleAgent, history: Sequence[Message], state: ConversationState, rng: random.Random):
        self.agent, self.history, self.state, self.rng = agent, history, state, rng
        self.details = details_of(state.task)
        self.view = UserView(history, self.details)
        self.messages: list[Message] = []
        self.said: list[str] = []
        self.turn = AgentTurn(state=state)

    def goal_index(self, name: str) -> int | None:
        return next((i for i, g in enumerate(self.state.task.goals) if g.name == name), None)

    def pending(self, name: str) -> bool:
        index = self.goal_index(name)
        return index is not None and index not in self.state.completed

    def run(self) -> AgentTurn:
        domain, first = self.view.focus(self.details.domains)
        if domain is None:
            self.said.append("Hello! I can help with restaurants, hotels, attractions and trains. What do you need?")
        else:
            self.serve(domain, first)
        self.messages.append(assistant(" ".join(self.said)))
        self.turn.messages, self.turn.reply = self.messages, " ".join(self.said)
        return self.turn

    def call(self, name: str, args: dict[str, str]) -> tuple[Any, bool]:
        """Run one tool call on the fork; returns (the result's data, whether it succeeded)."""
        call = ToolCall(name=name, arguments=args, id=call_id(len(self.history) + len(self.messages)))
        result = self.agent.env.call(self.state, call)
        self.messages += [assistant(calls=[call]), tool_result(call.id, result.content)]
        self.turn.completed_goals += list(result.completed_goals)
        if result.error is not None:
            self.turn.errors.append(result.error)
        try:
            body = json.loads(result.content)
        except json.JSONDecodeError:
            body = None
        ok = bool(body) and (not isinstance(body, dict) or body.get("success") is True)
        return (result.data if result.data is not None else body), ok

    def asked_before(self, domain: str, slot: str, since: int) -> bool:
        """Whether one of this agent's replies after the domain was first mentioned asked for ``slot``."""
        clause = ask(domain, slot).lower()
        users = -1
        for message in self.history:
            if message.role == "user":
                users += 1
            elif message.role == "assistant" and users >= since and clause in (message.content or "").lower():
                return True
        return False

    def arguments(self, domain: str, tool: str, wanted: dict[str, str], candidates: dict[str, list[str]]) -> dict:
        """The call's arguments: the wanted values (oracle) or the values the user said last (reveal-only)."""
        if not self.agent.reveal_only:
            return dict(wanted)
        enums = self.agent.enums.get(tool, {})
        said: dict[str, str] = {}
        for slot in enums:
            options = list(dict.fromkeys([*candidates.get(slot, []), *enums[slot]]))
            if slot in _YES_NO_SLOTS:
                mentions = self.view.yes_no(slot)
                if mentions:
                    said[slot] = mentions[-1][1]
                continue
            best = max(options, key=self.view.last, default=None)
            if best is not None and self.view.last(best) >= 0:
                said[slot] = best
        return said

    def noisy(self, args: dict[str, str], keep: str | None = None) -> dict[str, str]:
        """With probability ``noise``, ``args`` without one random key (never ``keep``)."""
        droppable = [k for k in args if k != keep]
        if droppable and self.rng.random() < self.agent.noise:
            dropped = self.rng.choice(droppable)
            args = {k: v for k, v in args.items() if k != dropped}
        return args

    def missing(self, domain: str, wanted: dict[str, str], since: int) -> list[str]:
        """Wanted details the user never said and that this agent has not asked for yet."""
        unsaid = [k for k, v in wanted.items() if self.view.slot_mention(k, v) < 0]
        return [k for k in unsaid if not self.asked_before(domain, k, since)]

    def serve(self, domain: str, first_offset: int) -> None:
        spec: DomainGoal = self.details.goal[domain]
        since = self.view.utterance_index(first_offset)
        self.view.floor = self.view.starts[since]
        info, fail = _clean(spec.info), _clean(spec.fail_info)
        failing = bool(fail) and _holds_to_fail(self.view, info, fail)
        row = _row_of(self.history, f"search_{domain}")
        found_now = False
        if failing or self.pending(f"search_{domain}") or (row is None and info):
            wanted = {**info, **fail} if failing else info
            ask_for = self.missing(domain, wanted, since)
            if ask_for:
                self.said.append(questions(domain, ask_for))
                return
            values = {k: [v for v in (info.get(k), fail.get(k)) if v] for k in {**info, **fail}}
            args = self.noisy(self.arguments(domain, f"search_{domain}", wanted, values))
            data, ok = self.call(f"search_{domain}", args)
            if not ok or not isinstance(data, Mapping):
                self.said.append(
                    f"I'm sorry, there is no {domain} {describe(args)}. Would you like to try something else?"
                )
                return
            row, found_now = dict(data), True
            self.said.append(summary(domain, row))
        if row is not None:
            asked = [
                a for a in requested(self.view.latest) if self.view.last(str(row.get(a, ""))) < self.view.starts[-1]
            ]
            reply = answers(row, asked)
            if reply:
                self.said.append(reply)
        booked = self.book(domain, spec, row) if row is not None else False
        if found_now and not booked and spec.book and domain in BOOK_OFFER and self.pending(f"book_{domain}"):
            self.said.append(f"Would you like me to book {BOOK_OFFER[domain]}?")
        elif not self.said:
            self.said.append("You're welcome! Is there anything else I can help you with?")
        elif not self.said[-1].endswith("?"):
            self.said.append("Is there anything else I can help you with?")

    def book(self, domain: str, spec: DomainGoal, row: Mapping[str, Any]) -> bool:
        """Book when the user asked for it in its last utterance; says how it went. True when it tried."""
        if domain not in BOOK_SLOTS or not spec.book:
            return False
        slots = BOOK_SLOTS[domain]
        book = {k: v for k, v in _clean(spec.book).items() if k in slots}
        fail = {k: v for k, v in _clean(spec.fail_book).items() if k in slots}
        booking_talk = _BOOKING_WORDS.search(self.view.text[self.view.floor :]) is not None
        gives_slot = any(self.view.last(v) >= self.view.starts[-1] for v in [*book.values(), *fail.values()])
        asked_to_book = _BOOKING_WORDS.search(self.view.latest) or (booking_talk and gives_slot)
        already_booked = self.goal_index(f"book_{domain}") is not None and not self.pending(f"book_{domain}")
        if not asked_to_book or already_booked:
            return False
        wanted = {**book, **fail} if fail and _holds_to_fail(self.view, book, fail) else book
        ask_for = self.missing(domain, wanted, self.view.utterance_index(self.view.floor))
        if ask_for:
            self.said.append(questions(domain, ask_for))
            return True
        key = ENTITY_KEY[domain]
        values = {k: [v for v in (book.get(k), fail.get(k)) if v] for k in slots}
        args = {**self.noisy(self.arguments(domain, f"book_{domain}", wanted, values), keep=key), key: row.get(key, "")}
        data, ok = self.call(f"book_{domain}", args)
        entity, details = row.get(key, "it"), describe({k: v for k, v in args.items() if k != key})
        if ok and isinstance(data, Mapping) and data.get("reference"):
            self.said.append(f"Your booking for {entity} {details} is confirmed. The reference is {data['reference']}.")
        else:
            self.said.append(f"I'm sorry, I couldn't book {entity} {details}. {RETRY[domain]}")
        return True


ORACLE = entry(
    "oracle", OracleAgent, builder_args=2, noun="agent", envs=("toolwoz",),
    summary="scripted ToolWOZ agent that knows the goals",
)  # fmt: skip
"""The ``oracle`` agent, which ``josh.agents.AGENTS`` names (``josh.envs.toolwoz.oracle:ORACLE``)."""
