"""Goal-less tasks (outcome-reward environments): every branch runs to its end, the final reward ranks them; on the
example plugin's echo environment."""

from __future__ import annotations

import asyncio
from pathlib import Path

from josh.core.agent import AgentTurn, PromptFrame
from josh.core.env import ConversationState
from josh.search.algorithm import SearchConfig, search
from josh.types import Message, ToolCall, assistant, tool_result


class Guesser:
    """Sample i submits ``answers[i]`` (cycled); an empty answer speaks instead of submitting."""

    def __init__(self, env, answers: list[str]) -> None:
        self.env, self.answers = env, answers

    def frame(self, task) -> PromptFrame:
        return PromptFrame(tools=list(self.env.tools))

    async def turn(self, history: list[Message], state: ConversationState, *, n: int = 1) -> list[AgentTurn]:
        turns = []
        for i in range(n):
            branch, answer = state.fork(), self.answers[i % len(self.answers)]
            if not answer:
                turns.append(AgentTurn(state=branch, reply="Which word?", messages=[assistant("Which word?")]))
                continue
            call = ToolCall(name="submit", arguments={"answer": answer}, id=f"s{i}")
            result = self.env.call(branch, call)
            turns.append(
                AgentTurn(state=branch, messages=[assistant(calls=[call]), tool_result(call.id, result.content)])
            )
        return turns


def _search(answers: list[str]):
    from josh_echo_env import EchoEnv, EchoUser

    env = EchoEnv()
    task = env.tasks("train")[0]  # apple
    return asyncio.run(search(task, env, Guesser(env, answers), EchoUser(), SearchConfig(branching=3, max_depth=3)))


def test_the_final_reward_ranks_the_finished_branches(echo_plugin: Path) -> None:
    tree = _search(["apple", "APPLE", ""])
    assert tree.error is None and tree.n_goals == 0 and tree.reward == 1.0 and tree.success
    lower, upper, asked = tree.nodes[1:4]
    assert (lower.reward, upper.reward, asked.reward) == (0.0, 1.0, 0.0)  # the third ended when the user left
    assert upper.ideal and tree.ideal_path()[-1].id == upper.id
    assert lower.pruned and asked.pruned and not lower.ideal


def test_no_rewarded_branch_leaves_the_tree_unlabelled(echo_plugin: Path) -> None:
    tree = _search(["pear", ""])
    assert tree.reward == 0.0 and not tree.success and tree.error is None
    assert all(n.reward == 0.0 for n in tree.nodes[1:]) and not any(n.ideal or n.pruned for n in tree.nodes)
