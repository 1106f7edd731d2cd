"""The judge prompt's version: stable for the shipped wording, changed by any change to the prompt or its grammar."""

from __future__ import annotations

import pytest

from josh.eval.judge import rubric


def test_the_prompt_version_is_the_shipped_prompts_and_is_stable() -> None:
    assert rubric.prompt_version() == rubric.PROMPT_VERSION
    assert rubric.PROMPT_VERSION.startswith(rubric.PROMPT_LABEL + "+")


@pytest.mark.parametrize(
    ("name", "value"),
    [("DIMENSIONS", {**rubric.DIMENSIONS, "cohesion": "Conversation cohesion, reworded."}), ("MAX_WHY", 200)],
)
def test_a_changed_prompt_or_grammar_changes_the_version(
    monkeypatch: pytest.MonkeyPatch, name: str, value: object
) -> None:
    monkeypatch.setattr(rubric, name, value)
    assert rubric.prompt_version() != rubric.PROMPT_VERSION
