"""josh: self-training tool-calling dialogue agents from sparse rewards."""

__version__ = "0.1.0"
