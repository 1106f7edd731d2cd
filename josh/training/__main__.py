"""``accelerate launch --config_file accelerate_config.yaml -m josh.training sft --recipe R``."""

from josh.training.cli import train_app

if __name__ == "__main__":
    train_app(prog_name="python -m josh.training")
