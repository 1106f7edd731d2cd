"""Forked τ² branches are exact: branches forked at several depths, writing the same records differently and
interleaved, never see each other's writes; every tool response of a branch (and its final DB) equals a fresh τ²
environment replaying that branch's calls; and the final reward of every branch of a scripted search equals τ²'s
evaluator on an independently built trajectory. A fork that shares records fails them (checked here too)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib import import_module
from itertools import zip_longest
from typing import Any

import pytest

from josh.envs.tau2 import Tau2Env, Tau2State
from josh.envs.tau2 import state as state_module
from josh.types import Message, ToolCall, assistant, tool_result, user
from tests.envs.tau2.helpers import Script, gold_closing, gold_script, tau2_reward

DOMAINS = ("airline", "retail", "telecom")


@dataclass
class Branch:
    """One branch of a scripted search: its state, the messages and the (side, call) script it played."""

    state: Tau2State
    messages: list[Message] = field(default_factory=lambda: [user("Hi, I need help.")])
    script: Script = field(default_factory=list)

    def fork(self) -> Branch:
        return Branch(self.state.fork(), list(self.messages), list(self.script))


def play(env: Tau2Env, branch: Branch, steps: Script) -> None:
    for side, call in steps:
        branch.script.append((side, call))
        if side == "user":  # the user says something after acting, as in a conversation
            env.user_call(branch.state, call)
            branch.messages.append(user("Done."))
        else:
            result = env.call(branch.state, call)
            branch.messages += [assistant(calls=[call]), tool_result(call.id, result.content)]


def _call(name: str, **arguments: Any) -> ToolCall:
    return ToolCall(name=name, arguments=arguments)


def _steps(env: Tau2Env, task) -> tuple[Script, Any]:
    """Reads of the records the writes touch, and ``writes(k)``: writes of those same records, different for each
    ``k`` (so sibling branches conflict)."""
    db = env.reset(task).environment.tools.db
    if env.domain == "retail":
        order = next(o for o in db.orders.values() if o.status == "pending")
        where = {"address1": "1 Main St", "address2": "", "state": "CA", "country": "USA", "zip": "12345"}
        reads = [_call("get_order_details", order_id=order.order_id), _call("get_user_details", user_id=order.user_id)]

        def writes(k: int) -> Script:
            calls = [
                _call("modify_user_address", user_id=order.user_id, city=f"City {k}", **where),
                _call("modify_pending_order_address", order_id=order.order_id, city=f"Town {k}", **where),
            ]
            if k % 3 == 2:
                calls.append(_call("cancel_pending_order", order_id=order.order_id, reason="no longer needed"))
            return [("assistant", c) for c in calls]

    elif env.domain == "airline":
        booking = next(r for r in db.reservations.values() if r.status != "cancelled")
        payment = next(iter(db.users[booking.user_id].payment_methods))
        reads = [
            _call("get_reservation_details", reservation_id=booking.reservation_id),
            _call("get_user_details", user_id=booking.user_id),
        ]

        def writes(k: int) -> Script:
            bags = {"total_baggages": k, "nonfree_baggages": 0, "payment_id": payment}
            calls = [
                _call("update_reservation_baggages", reservation_id=booking.reservation_id, **bags),
                _call("send_certificate", user_id=booking.user_id, amount=10 * (k + 1)),
            ]
            if k % 3 == 2:
                calls.append(_call("cancel_reservation", reservation_id=booking.reservation_id))
            return [("assistant", c) for c in calls]

    else:
        environment = env.reset(task).environment
        phone = environment.user_tools.db.surroundings.phone_number
        line = environment.tools._get_line_by_phone(phone).line_id
        customer = environment.tools.get_customer_by_phone(phone).customer_id
        owner = {"customer_id": customer, "line_id": line}
        telecom_reads: Script = [
            ("assistant", _call("get_data_usage", **owner)),
            ("user", _call("check_status_bar")),
            ("user", _call("check_network_status")),
        ]
        toggles = ("toggle_data", "toggle_roaming", "toggle_wifi", "toggle_airplane_mode")

        def writes(k: int) -> Script:
            return [
                ("assistant", _call("refuel_data", gb_amount=float(k + 1), **owner)),
                ("user", _call(toggles[k % len(toggles)])),
                ("assistant", _call("enable_roaming" if k % 2 else "disable_roaming", **owner)),
            ]

        return telecom_reads, writes
    return [("assistant", r) for r in reads], writes


def fresh_environment(env: Tau2Env, task) -> Any:
    """A τ² environment built by τ²'s own code for ``task``, without josh."""
    environment = import_module(f"tau2.domains.{env.domain}.environment").get_environment()
    initial = env.tau2_task(task).initial_state
    if initial is not None:
        environment.set_state(
            initial.initialization_data, initial.initialization_actions, initial.message_history or []
        )
    return environment


def hashes(environment: Any) -> tuple[str, str]:
    """τ²'s hashes of the environment's database and the user's."""
    return environment.get_db_hash(), environment.get_user_db_hash()


def mismatches(
    env: Tau2Env, task, branches: dict[str, Branch], ours: dict[str, tuple[str, str]] | None = None
) -> Iterator[str]:
    """Where a branch's responses or final DB (its ``hashes``, from ``ours`` when given) differ from a fresh τ²
    environment replaying its calls, branch by branch (``list()`` checks them all; ``next()`` stops at the first: a
    τ² load per branch checked)."""
    for name, branch in branches.items():
        environment = fresh_environment(env, task)
        for index, (_, call, response) in enumerate(branch.state.calls):
            expected = environment.get_response(call)
            if (expected.content, expected.error) != (response.content, response.error):
                yield f"{name} call {index} {call.name}"
        if (ours[name] if ours else hashes(branch.state.environment)) != hashes(environment):
            yield f"{name} final DB"


def final_hashes(branches: dict[str, Branch]) -> dict[str, tuple[str, str]]:
    return {name: hashes(branch.state.environment) for name, branch in branches.items()}


def search_tree(env: Tau2Env, task) -> dict[str, Branch]:
    """Branches forked at depths 1 and 2 (the parents go on after forking), writing the same records differently,
    their steps interleaved round-robin."""
    reads, writes = _steps(env, task)
    root = Branch(env.reset(task))
    play(env, root, reads + writes(0))
    tree = {"root": root, "a": root.fork(), "b": root.fork()}
    _interleave(env, {"root": writes(1) + reads, "a": writes(2) + reads, "b": reads + writes(3) + reads}, tree)
    tree.update(a1=tree["a"].fork(), a2=tree["a"].fork(), b1=tree["b"].fork())
    scripts = {name: writes(4 + i) + reads for i, name in enumerate(("root", "a", "b", "a1", "a2"))}
    _interleave(env, {**scripts, "b1": reads}, tree)
    return tree


def _interleave(env: Tau2Env, scripts: dict[str, Script], tree: dict[str, Branch]) -> None:
    for steps in zip_longest(*scripts.values()):
        for name, step in zip(scripts, steps, strict=True):
            if step is not None:
                play(env, tree[name], [step])


@pytest.mark.parametrize("domain", DOMAINS)
def test_branches_never_see_each_others_writes(tau2_envs, domain: str) -> None:
    """Expensive by design (about 2 s on airline): each of the six branches is replayed on its own fresh τ² load and
    both sides hashed by τ²'s code, which serialises the whole database; a shared replay would share the bug."""
    env = tau2_envs(domain)
    task = env.tasks("base")[0]
    pristine = env.reset(task).environment
    before = hashes(pristine)
    tree = search_tree(env, task)
    ours = final_hashes(tree)
    assert list(mismatches(env, task, tree, ours)) == []
    assert len(set(ours.values())) == len(tree)  # every branch wrote differently, and each kept its own
    assert hashes(pristine) == before
    assert sum(1 for b in tree.values() for _, _, m in b.state.calls if not m.error) > 5 * len(tree)


def own_env(domain: str) -> Tau2Env:
    """An env over its own τ² load, not the process's shared one: a broken fork changes its data."""
    return Tau2Env(domain, environment=import_module(f"tau2.domains.{domain}.environment").get_environment())


@pytest.mark.parametrize("domain", ("airline", "retail"))
def test_a_fork_that_shares_records_is_caught(domain: str, monkeypatch: pytest.MonkeyPatch) -> None:
    env = own_env(domain)
    task = env.tasks("base")[0]
    monkeypatch.setattr(state_module.Table, "_record", dict.__getitem__)  # records shared between branches
    assert next(mismatches(env, task, search_tree(env, task)), None) is not None


def test_a_fork_that_shares_the_telecom_environment_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    env = own_env("telecom")
    task = env.tasks("base")[0]
    monkeypatch.setattr(state_module, "branch", lambda environment: environment)
    assert next(mismatches(env, task, search_tree(env, task)), None) is not None


@pytest.mark.parametrize("domain", DOMAINS)
def test_every_branch_of_a_scripted_search_scores_as_tau2(tau2_envs, domain: str) -> None:
    """Expensive by design: τ²'s evaluator, the reference, loads and hashes two environments of its own per branch
    (about half a second a branch on airline)."""
    env = tau2_envs(domain)
    task = next(t for t in env.tasks("base") if t.goals and (domain != "telecom" or t.details["user_actions"]))
    gold = gold_script(task)
    first = next(i for i, (side, c) in enumerate(gold) if side == "assistant" and c.name in env.write_tools)
    _, writes = _steps(env, task)
    root = Branch(env.reset(task))
    play(env, root, gold[:first])
    branches = {"gold": root.fork(), "dropped": root.fork()}
    play(env, branches["gold"], gold[first : first + 1])
    branches["late"] = branches["gold"].fork()
    branches["conflict"] = branches["gold"].fork()
    play(env, branches["dropped"], gold[first + 1 :])
    play(env, branches["conflict"], writes(2) + gold[first + 1 :])
    play(env, branches["gold"], gold[first + 1 :])
    play(env, branches["late"], gold[first + 1 :] + writes(3))
    rewards = {}
    for name, branch in branches.items():
        rewards[name] = env.reward(branch.state, [*branch.messages, assistant(gold_closing(task))])
        assert rewards[name] == tau2_reward(env, task, branch.script, gold_closing(task), branch.state.calls), name
    assert rewards["gold"] == 1.0 and rewards["dropped"] == 0.0
    assert branches["gold"].state.goal_reward == 1.0 > branches["dropped"].state.goal_reward
