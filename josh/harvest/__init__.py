"""Training data from search trees: SFT/KTO/DPO extraction, the no-selection control, advantages, warm start."""
