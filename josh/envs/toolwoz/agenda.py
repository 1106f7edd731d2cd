"""Agenda-based rule user for ToolWOZ: a deterministic, goal-driven customer that needs no LLM.

The user works through the task's domains in order. For each domain it states the search constraints piecemeal
(``chunk`` at a time, answering the agent's questions first), tries the ``fail_info`` constraints first and
switches to ``info`` once the agent reports no match, then asks to book (``fail_book`` first, falling back to
``book`` when the booking fails) and asks for the requested attributes (``reqt``) in the same breath. A domain is
finished when the agent's reply carries the booking reference (booking domains), names the goal entity, or
presents a result after every constraint was stated. When all domains are finished it says goodbye
(``UserTurn(done=True)``); after ``patience`` replies in a row without progress it gives up. It reads the first
``READ_LIMIT`` characters of each agent reply (about 4,000 tokens; an endless reply is not read to its end), and
every rule costs time linear in what it reads.

The simulator is stateless: every call replays the agenda over the visible transcript (user turns and the agent's
replies), so forked conversations need no copy of it and the same transcript always gets the same reply.
Utterances carry slot values verbatim (yes/no slots such as parking are worded, e.g. "with free parking"); the
wording is picked among several variants by a hash of the task id and the turn index.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from josh.core.user import UserTurn
from josh.envs.toolwoz.agenda_text import (
    asks_about,
    attribute_list,
    book_phrase,
    choose,
    intent,
    join_phrases,
    questions_of,
    search_phrase,
    sentences,
    slot_noun,
)
from josh.envs.toolwoz.normalize import is_no_constraint, normalize, plain_text
from josh.envs.toolwoz.task import BOOK_SLOTS, ENTITY_KEY, details_of
from josh.registry import entry
from josh.types import Message, Task

_SEARCH_ORDER = {
    "restaurant": ("name", "food", "area", "pricerange"),
    "hotel": ("name", "type", "area", "pricerange", "stars", "parking", "internet"),
    "attraction": ("name", "type", "area"),
    "train": ("departure", "destination", "day", "leaveAt", "arriveBy"),
}
_BOOK_ORDER = ("people", "day", "time", "stay")
READ_LIMIT = 16_000

_NEGATIVE = re.compile(
    r"\b(sorry|unfortunately|no (matching|match|matches|results?|availability|options?)|nothing (matches|matching|"
    r"available)|(couldnt|could not|cant|cannot|unable to|wasnt able to|was not able to|not able to) (find|book|make|"
    r"complete|locate|reserve)|there (is|are|were) no|not available|unavailable|fully booked|failed|didnt go through|"
    r"unsuccessful|no longer available)\b"
)
_REFERENCE = re.compile(r"\breference\b")
_WORD = re.compile(r"\w+")
_CODE = re.compile(r"[a-z0-9]{5,}")


def mentions(text: str, value: str) -> bool:
    """Whether a normalised ``text`` contains ``value`` as a whole phrase."""
    needle = plain_text(value)
    return bool(needle) and re.search(rf"(?<![a-z0-9]){re.escape(needle)}(?![a-z0-9])", text) is not None


def _clean(slots: dict[str, str], keys: Iterable[str] | None = None) -> dict[str, str]:
    allowed = set(keys) if keys is not None else None
    return {k: v for k, v in slots.items() if not is_no_constraint(v) and (allowed is None or k in allowed)}


def _ordered(slots: dict[str, str], order: Sequence[str]) -> list[str]:
    return [k for k in order if k in slots] + sorted(k for k in slots if k not in order)


def _variant(base: dict[str, str], override: dict[str, str]) -> dict[str, str] | None:
    """``base`` with ``override`` applied, or None when that changes nothing."""
    merged = {**base, **override}
    same = merged.keys() == base.keys() and all(normalize(merged[k]) == normalize(base[k]) for k in base)
    return None if same else merged


@dataclass(frozen=True)
class DomainAgenda:
    """What the user wants in one domain, in the order it will say it."""

    domain: str
    search: dict[str, str]
    search_fail: dict[str, str] | None
    book: dict[str, str]
    book_fail: dict[str, str] | None
    reqt: tuple[str, ...]
    entity: str | None
    reference: str | None

    @property
    def wants_book(self) -> bool:
        return bool(self.book)


def plan_of(task: Task) -> list[DomainAgenda]:
    """The agenda of a ToolWOZ task: one entry per goal domain, in task order."""
    if task.env != "toolwoz":
        raise ValueError(f"the agenda user plays ToolWOZ tasks only; task {task.id!r} is {task.env!r}")
    details = details_of(task)
    plan = []
    for domain in details.domains:
        spec = details.goal[domain]
        info = _clean(spec.info)
        book = _clean(spec.book, BOOK_SLOTS.get(domain, ()))
        booked = details.booked.get(domain, {})
        entity = booked.get(ENTITY_KEY[domain]) or info.get("name")
        fail_book = _variant(book, _clean(spec.fail_book, BOOK_SLOTS.get(domain, ()))) if book else None
        plan.append(
            DomainAgenda(
                domain=domain,
                search=info,
                search_fail=_variant(info, _clean(spec.fail_info)) if spec.fail_info else None,
                book=book,
                book_fail=fail_book,
                reqt=tuple(r for r in spec.reqt if r),
                entity=entity,
                reference=booked.get("reference"),
            )
        )
    return plan


@dataclass(frozen=True)
class Position:
    """Where the user stands in its agenda; derived afresh from the transcript on every call."""

    domain: int = 0
    phase: str = "search"
    fail_search: bool = False
    fail_book: bool = False
    revealed: frozenset[str] = frozenset()
    reqt_asked: bool = False
    stalled: int = 0

    def key(self) -> tuple:
        return (self.domain, self.phase, self.fail_search, self.fail_book, self.revealed, self.reqt_asked)


def agent_replies(transcript: Sequence[Message]) -> list[str]:
    """The agent's reply (possibly empty) after each user utterance of the transcript."""
    replies: list[list[str]] = []
    for message in transcript:
        if message.role == "user":
            replies.append([])
        elif message.role == "assistant" and replies and message.content:
            replies[-1].append(message.content)
    return [" ".join(parts) for parts in replies]


def asked_slots(reply: str, slots: Iterable[str]) -> list[str]:
    """The slots among ``slots`` that a question sentence of the (normalised) reply asks about."""
    questions = " ".join(questions_of(reply))
    return [s for s in slots if questions and asks_about(s, questions)]


def gives_reference(text: str) -> bool:
    """Whether a sentence of the (normalised) text names a reference and then a code of 5+ letters and digits
    with at least one digit ("your reference number is 00000012")."""
    for sentence in sentences(text):
        said = _REFERENCE.search(sentence)
        if said is None:
            continue
        for word in _WORD.finditer(sentence, said.end()):
            if _CODE.fullmatch(word.group()) and any(c.isdigit() for c in word.group()):
                return True
    return False


class _Run:
    """One replay of the agenda over a transcript."""

    def __init__(self, task_id: str, plan: list[DomainAgenda], chunk: int, patience: int) -> None:
        self.task_id, self.plan, self.chunk, self.patience = task_id, plan, chunk, patience
        self.turn = 0
        self.pos = Position(fail_search=bool(plan and plan[0].search_fail))

    def pick(self, kind: str, options: Sequence[str]) -> str:
        return choose(options, f"{self.task_id}|{self.turn}|{kind}")

    @property
    def agenda(self) -> DomainAgenda:
        return self.plan[self.pos.domain]

    def search_slots(self) -> dict[str, str]:
        a = self.agenda
        return a.search_fail if self.pos.fail_search and a.search_fail else a.search

    def book_slots(self) -> dict[str, str]:
        a = self.agenda
        return a.book_fail if self.pos.fail_book and a.book_fail else a.book

    def open(self) -> UserTurn:
        if not self.plan:
            return UserTurn(text=self.pick("bye", _BYE), done=True)
        return self.opening("")

    def step(self, reply: str) -> UserTurn:
        """Read one agent reply, move the position, say the next utterance."""
        self.turn += 1
        before = self.pos.key()
        text = plain_text(reply[:READ_LIMIT])
        if self.pos.phase == "search":
            said = self.step_search(text)
        elif self.pos.phase == "book":
            said = self.step_book(text)
        else:
            said = self.finish_domain("ok") if text else self.pick("again", _HELLO)
        if isinstance(said, UserTurn):
            return said
        stalled = 0 if self.pos.key() != before else self.pos.stalled + 1
        self.pos = replace(self.pos, stalled=stalled)
        if stalled >= self.patience:
            return UserTurn(text=self.pick("giveup", _GIVE_UP), done=True)
        return UserTurn(text=said)

    def opening(self, prefix: str) -> UserTurn:
        a = self.agenda
        slots = self.search_slots()
        first = _ordered(slots, _SEARCH_ORDER.get(a.domain, ()))[: self.chunk]
        self.pos = replace(self.pos, revealed=frozenset(first))
        text = intent(a.domain, self.task_id, self.turn)
        if first:
            text += " " + self.pick("constraints", _CONSTRAINTS).format(x=self.phrases(first, slots))
        return UserTurn(text=(prefix + " " + text).strip())

    def phrases(self, keys: Sequence[str], slots: dict[str, str]) -> str:
        return join_phrases([search_phrase(self.agenda.domain, k, slots[k]) for k in keys])

    def step_search(self, text: str) -> str | UserTurn:
        a, slots = self.agenda, self.search_slots()
        order = _ordered(slots, _SEARCH_ORDER.get(a.domain, ()))
        hidden = [k for k in order if k not in self.pos.revealed]
        if not self.pos.fail_search and a.entity and mentions(text, a.entity):
            return self.search_done()
        if _NEGATIVE.search(text) and not hidden:
            return self.switch_search("pity") if self.pos.fail_search else self.insist(order, slots)
        asked = asked_slots(text, order)
        if asked:
            self.pos = replace(self.pos, revealed=self.pos.revealed | set(asked))
            return self.pick("answer", _ANSWER).format(x=self.phrases(asked, slots))
        other = asked_slots(text, [s for s in _SEARCH_ORDER.get(a.domain, ()) if s not in slots])
        prefix = self.pick("dontcare", _DONT_CARE).format(x=slot_noun(other[0])) + " " if other else ""
        if hidden:
            more = hidden[: self.chunk]
            self.pos = replace(self.pos, revealed=self.pos.revealed | set(more))
            return prefix + self.pick("more", _MORE).format(x=self.phrases(more, slots))
        if self.pos.fail_search:
            return self.switch_search("change")
        if other or not text or (a.entity and not mentions(text, a.entity)):
            return prefix + self.insist(order, slots)
        return self.search_done()

    def insist(self, order: list[str], slots: dict[str, str]) -> str:
        return self.pick("insist", _INSIST).format(x=self.phrases(order, slots))

    def switch_search(self, why: str) -> str:
        a = self.agenda
        old, new = a.search_fail or {}, a.search
        changed = [
            k for k in _ordered(new, _SEARCH_ORDER.get(a.domain, ())) if normalize(old.get(k)) != normalize(new[k])
        ]
        dropped = [k for k in old if k not in new]
        kept = {k for k in self.pos.revealed if k in new and k not in changed}
        self.pos = replace(self.pos, fail_search=False, revealed=frozenset(kept | set(changed)))
        text = self.pick(why, _PITY if why == "pity" else _CHANGE_MIND)
        text += " " + self.pick("switch", _SWITCH).format(x=self.phrases(changed, new)) if changed else ""
        if dropped:
            text += " " + self.pick("drop", _DONT_CARE).format(x=slot_noun(dropped[0]))
        return text

    def search_done(self) -> str | UserTurn:
        a = self.agenda
        if a.wants_book:
            self.pos = replace(self.pos, phase="book", fail_book=a.book_fail is not None)
            return self.book_request()
        if a.reqt:
            self.pos = replace(self.pos, phase="reqt", reqt_asked=True)
            return self.pick("reqt", _REQT).format(x=attribute_list(a.reqt))
        return self.finish_domain("ok")

    def book_request(self) -> str:
        a, slots = self.agenda, self.book_slots()
        keys = _ordered(slots, _BOOK_ORDER)
        text = self.pick("book", _BOOK).format(x=join_phrases([book_phrase(a.domain, k, slots[k]) for k in keys]))
        if a.reqt and not self.pos.reqt_asked:
            self.pos = replace(self.pos, reqt_asked=True)
            text += " " + self.pick("reqt", _REQT).format(x=attribute_list(a.reqt))
        return text

    def step_book(self, text: str) -> str | UserTurn:
        a, slots = self.agenda, self.book_slots()
        if (a.reference and mentions(text, a.reference)) or (not a.reference and gives_reference(text)):
            return self.finish_domain("ok")
        if _NEGATIVE.search(text):
            if not (self.pos.fail_book and a.book_fail):
                return self.finish_domain("nobook")
            changed = [k for k in _ordered(a.book, _BOOK_ORDER) if normalize(slots.get(k)) != normalize(a.book[k])]
            self.pos = replace(self.pos, fail_book=False)
            phrase = join_phrases([book_phrase(a.domain, k, a.book[k]) for k in changed])
            return self.pick("pity", _PITY) + " " + self.pick("rebook", _REBOOK).format(x=phrase)
        asked = asked_slots(text, _ordered(slots, _BOOK_ORDER))
        if asked:
            return self.pick("answer", _ANSWER).format(
                x=join_phrases([book_phrase(a.domain, k, slots[k]) for k in asked])
            )
        return self.book_request()

    def finish_domain(self, how: str) -> UserTurn:
        nxt = self.pos.domain + 1
        prefix = self.pick("thanks", _THANKS if how == "ok" else _NO_BOOKING)
        if nxt >= len(self.plan):
            return UserTurn(text=prefix + " " + self.pick("bye", _BYE), done=True)
        self.pos = Position(domain=nxt, fail_search=self.plan[nxt].search_fail is not None)
        return self.opening(prefix)


_CONSTRAINTS = ("I'd like something {x}.", "Ideally {x}.", "I'm after something {x}.")
_ANSWER = ("Sure, {x}.", "I'd like it {x}.", "Let's say {x}.")
_MORE = ("Also, I'd like it {x}.", "Oh, and {x}, please.", "It should also be {x}.")
_DONT_CARE = ("I don't mind about the {x}.", "The {x} doesn't matter to me.")
_INSIST = ("Could you check again? I'm looking for something {x}.", "That's not quite it. I want something {x}.")
_PITY = ("Oh, that's a pity.", "Ah, too bad.", "Hmm, that's a shame.")
_CHANGE_MIND = ("Actually, I've changed my mind.", "Hmm, on second thought, let's change that.")
_SWITCH = ("How about one {x} instead?", "Could you try {x} instead?", "Then let's go with {x}.")
_BOOK = ("Great, could you book it {x}?", "Please book it {x}.", "That sounds good. I'd like to book it {x}.")
_REBOOK = ("Could you try booking it {x} instead?", "How about {x} instead?")
_REQT = ("Could you also tell me the {x}?", "Also, what is the {x}?", "And what's the {x}?")
_THANKS = ("Thanks!", "Perfect, thank you.", "Great, thanks.")
_NO_BOOKING = ("Never mind the booking then.", "Oh well, let's skip the booking.")
_BYE = ("That's everything I needed. Goodbye!", "That's all, thanks for your help. Bye!", "Nothing else, goodbye!")
_GIVE_UP = ("I don't think this is working. Goodbye.", "Never mind, I'll look elsewhere. Bye.")
_HELLO = ("Hello? Are you still there?", "Could you answer my question, please?")


class AgendaUser:
    """Deterministic goal-driven ToolWOZ user (see the module docstring); ``chunk`` constraints per utterance."""

    def __init__(self, llm: object = None, *, chunk: int = 2, patience: int = 3) -> None:
        if chunk < 1 or patience < 1:
            raise ValueError("chunk and patience must be at least 1")
        self.chunk, self.patience = chunk, patience

    def respond(self, task: Task, transcript: Sequence[Message]) -> UserTurn:
        """The next utterance for ``transcript`` (synchronous form of ``reply``)."""
        run = _Run(task.id, plan_of(task), self.chunk, self.patience)
        said = run.open()
        for reply in agent_replies(transcript):
            if said.done:
                break
            said = run.step(reply)
        return said

    async def reply(self, task: Task, transcript: list[Message]) -> UserTurn:
        return self.respond(task, transcript)


AGENDA = entry(
    "agenda", AgendaUser, builder_args=1, noun="user", envs=("toolwoz",),
    summary="rule-based ToolWOZ customer working through its goals",
)  # fmt: skip
"""The ``agenda`` user, which ``josh.users.USERS`` names (``josh.envs.toolwoz.agenda:AGENDA``)."""
