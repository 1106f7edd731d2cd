"""Batched serving vs one request at a time with the ``hf`` backend and the offline SmolLM2 on CPU.

Eight short, different dialogue prompts are served (a) one at a time, each awaited before the next, and (b) all at
once, which the backend gathers into one batched ``generate``. Rounds alternate between the two modes so load from
other processes hits both alike. Prints generated tokens per second for each mode and their ratio (target >= 3x).

    python benchmarks/batching.py [--rounds 2] [--max-new-tokens 48] [--threads N]

On a machine shared with other busy processes, ``--threads 1`` avoids torch's thread pool waiting on descheduled
threads, which slows small batches (the one-at-a-time baseline) far more than large ones.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time

import torch

from josh.core.llm import Sampling
from josh.llm.hf import HFLLM
from josh.types import Message, assistant, system, user

SYSTEM = "You are a helpful assistant for booking restaurants, hotels and trains in Cambridge. Answer briefly."


def conversation(*turns: str) -> list[Message]:
    """The system prompt, then ``turns``: the user's, the assistant's, the user's, ..."""
    return [system(SYSTEM), *(user(text) if i % 2 == 0 else assistant(text) for i, text in enumerate(turns))]


CONVERSATIONS: list[list[Message]] = [
    conversation("I need a cheap restaurant in the centre that serves chinese food."),
    conversation("Can you find me a hotel in the north with free parking?"),
    conversation("I want a train from Cambridge to London on Friday morning."),
    conversation(
        "Book a table for four at an italian place.",
        "Sure. What day and time would you like?",
        "Saturday at 7pm, please.",
    ),
    conversation("What museums are there in the west of town?"),
    conversation("My flight lands at 9pm; is there a guesthouse near the station?"),
    conversation(
        "I'd like an expensive french restaurant.",
        "There are two in the south. Shall I book one?",
        "Yes, for two people tomorrow.",
    ),
    conversation("Is there a taxi available from the hotel to the museum at noon?"),
]


async def sequential(llm: HFLLM, sampling: Sampling) -> tuple[int, float]:
    start = time.perf_counter()
    tokens = 0
    for conversation in CONVERSATIONS:
        [reply] = await llm.chat(conversation, sampling=sampling)
        tokens += reply.completion_tokens
    return tokens, time.perf_counter() - start


async def concurrent(llm: HFLLM, sampling: Sampling) -> tuple[int, float]:
    start = time.perf_counter()
    replies = await asyncio.gather(*(llm.chat(c, sampling=sampling) for c in CONVERSATIONS))
    return sum(r[0].completion_tokens for r in replies), time.perf_counter() - start


async def main(rounds: int, max_new_tokens: int) -> None:
    llm = HFLLM("smollm2", max_batch_size=len(CONVERSATIONS))
    sampling = Sampling(temperature=0.8, top_p=0.95, max_new_tokens=max_new_tokens, seed=0)
    await llm.chat(CONVERSATIONS[0], sampling=sampling.model_copy(update={"max_new_tokens": 4}))
    totals = {"one at a time": [0, 0.0], "8 concurrent": [0, 0.0]}
    batches_before = llm.batcher.batches
    for _ in range(rounds):
        for name, mode in (("one at a time", sequential), ("8 concurrent", concurrent)):
            tokens, seconds = await mode(llm, sampling)
            totals[name][0] += tokens
            totals[name][1] += seconds
    llm.close()
    rates = {name: tokens / seconds for name, (tokens, seconds) in totals.items()}
    generates = llm.batcher.batches - batches_before
    print(
        f"SmolLM2-135M-Instruct on CPU, {os.cpu_count()} cores, {torch.get_num_threads()} torch threads, "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    print(
        f"{rounds} rounds x {len(CONVERSATIONS)} conversations, max_new_tokens={max_new_tokens}, {generates} generates"
    )
    for name, (tokens, seconds) in totals.items():
        print(f"{name:>14}: {tokens:5d} tokens in {seconds:6.1f}s = {rates[name]:6.1f} tok/s")
    print(f"speed-up: {rates['8 concurrent'] / rates['one at a time']:.2f}x (target >= 3x)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    asyncio.run(main(args.rounds, args.max_new_tokens))
