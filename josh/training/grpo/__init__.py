"""Online GRPO on whole conversations: the trainer and its rollout function, the rollout ledger, the colocated vLLM
engine, and the ``grpo:`` section of a training recipe."""
