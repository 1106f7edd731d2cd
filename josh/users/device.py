"""The LLM users' own device (τ² telecom): its tools' names for the prompt, and the calls read from a reply.

The tools go to the backend as ``tools=`` like a function-calling agent's: natively through an OpenAI-compatible
API, through the chat template (``hf``, ``vllm``), or to the policy (``scripted``). Calls come back as native
``tool_calls`` or as ``<tool_call>`` JSON in the text (``josh.core.parsing.parse_tool_calls``), so a
model without native tool calling writes them in text. A call that cannot be read (no name, arguments that are
not a JSON object) is still returned: the runner answers it with an error the user sees at its next step.
"""

from __future__ import annotations

from typing import Any

from josh.core.llm import Completion
from josh.core.parsing import parse_tool_calls
from josh.types import ToolCall

MAX_CALLS = 3
"""The most calls read from one reply."""


def tool_names(tools: list[dict[str, Any]]) -> list[str]:
    """The function names of OpenAI tool schemas."""
    return [str(tool.get("function", tool).get("name", "")) for tool in tools]


def device_calls(completion: Completion) -> list[ToolCall]:
    """The device calls of one reply (none when it is a message to the agent)."""
    parsed = parse_tool_calls(completion.text, completion.tool_calls, max_calls=MAX_CALLS)
    return [read.call for read in parsed.calls]
