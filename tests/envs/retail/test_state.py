"""Copy-on-write forks of the retail state: branches never see each other's writes, the shared DB never changes."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from josh.envs.retail import RetailEnv, RetailState
from josh.envs.taubench.state import canonical
from josh.types import Task, ToolCall

PROBE = Task(id="fork-probe", env="retail", details={"user_id": "", "instruction": ""})


@pytest.fixture(scope="module")
def env(shared_data) -> RetailEnv:
    return RetailEnv(shared_data / "taubench" / "retail")


def snapshot(env: RetailEnv, pool: list[ToolCall] | None = None) -> str:
    """Canonical text of the shared records that ``pool`` can touch (all of them when ``pool`` is None)."""
    if pool is None:
        return canonical({"users": env.db.users, "orders": env.db.orders})
    orders = {c.arguments["order_id"] for c in pool if "order_id" in c.arguments}
    users = {c.arguments.get("user_id") or env.db.orders[c.arguments["order_id"]]["user_id"] for c in pool}
    return canonical([[env.db.users[u] for u in sorted(users)], [env.db.orders[o] for o in sorted(orders)]])


@pytest.fixture(scope="module")
def full_snapshot(env: RetailEnv) -> str:
    """The database as the files on disk hold it."""
    users, orders = (json.loads((env.data_dir / f"{name}.json").read_text()) for name in ("users", "orders"))
    return canonical({"users": users, "orders": orders})


@pytest.fixture(scope="module")
def write_pool(env: RetailEnv) -> list[ToolCall]:
    """Gold writes of the train users with the most tasks (so writes collide on orders and gift cards), plus
    default-address changes for those users."""
    tasks = env.tasks("train")
    busiest = [uid for uid, _ in Counter(t.details["user_id"] for t in tasks).most_common(3)]
    pool = [
        ToolCall(name=g.name, arguments=g.parameters) for t in tasks if t.details["user_id"] in busiest for g in t.goals
    ]
    address = {"address1": "9 Fork Rd", "address2": "", "city": "Reno", "state": "NV", "country": "USA", "zip": "89501"}
    pool += [ToolCall(name="modify_user_address", arguments={"user_id": uid, **address}) for uid in busiest]
    return pool


def replay(env: RetailEnv, state: RetailState, calls: list[ToolCall]) -> list[str]:
    return [env.call(state, call).content for call in calls]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_forks_are_independent(env: RetailEnv, write_pool: list[ToolCall], full_snapshot: str, data) -> None:
    ops = st.lists(st.sampled_from(write_pool), max_size=6)
    prefix, left, right = data.draw(ops), data.draw(ops), data.draw(ops)
    order = data.draw(st.permutations([0] * len(left) + [1] * len(right)))
    touched = snapshot(env, write_pool)
    root = env.reset(PROBE)
    replay(env, root, prefix)
    root_hash = root.data_hash()
    branches = (root.fork(), root.fork())
    outputs: tuple[list[str], list[str]] = ([], [])
    queues = (list(left), list(right))
    for side in order:
        outputs[side].append(env.call(branches[side], queues[side].pop(0)).content)
    for side, calls in enumerate((left, right)):
        alone = env.reset(PROBE)
        replay(env, alone, prefix)
        assert replay(env, alone, calls) == outputs[side]
        assert alone.data_hash() == branches[side].data_hash()
    assert root.data_hash() == root_hash
    assert snapshot(env, write_pool) == touched


def test_parent_writes_after_fork_stay_out_of_the_child(env: RetailEnv, write_pool: list[ToolCall]) -> None:
    parent = env.reset(PROBE)
    address = next(c for c in write_pool if c.name == "modify_user_address")
    user_id = address.arguments["user_id"]
    env.call(parent, address)
    child = parent.fork()
    changed = dict(address.arguments, city="Elko")
    env.call(parent, ToolCall(name="modify_user_address", arguments=changed))
    assert parent.user(user_id)["address"]["city"] == "Elko"
    assert child.user(user_id)["address"]["city"] == "Reno"
    assert env.db.users[user_id]["address"] != child.user(user_id)["address"]


def test_fork_copies_log_goals_and_termination(env: RetailEnv) -> None:
    task = env.tasks("train")[0]
    state = env.reset(task)
    goal = task.goals[0]
    env.call(state, ToolCall(name=goal.name, arguments=goal.parameters))
    child = state.fork()
    assert isinstance(child, RetailState) and child.completed == {0} and len(child.log) == 1
    env.call(child, ToolCall(name="transfer_to_human_agents", arguments={"summary": "x"}))
    assert child.terminated and not state.terminated and len(state.log) == 1


def test_unchanged_overlay_records_do_not_change_the_hash(env: RetailEnv) -> None:
    state = env.reset(PROBE)
    empty_hash = state.data_hash()
    user_id, user = next(iter(env.db.users.items()))
    env.call(state, ToolCall(name="modify_user_address", arguments={"user_id": user_id, **user["address"]}))
    assert state.overlays["users"] and state.data_hash() == empty_hash


def test_shared_database_is_never_mutated(env: RetailEnv, full_snapshot: str) -> None:
    """Runs last in this module: every write so far (this module and any earlier one) went to overlays."""
    assert snapshot(env) == full_snapshot
