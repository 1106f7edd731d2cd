"""One run: its spec and components, what produced it, and a conversation stepped turn by turn with its diagnostics."""
