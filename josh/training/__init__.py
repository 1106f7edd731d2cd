"""Fine-tuning: SFT / KTO / DPO with LoRA and optional 4-bit through TRL and accelerate."""
