"""Small pieces every layer uses: crash-safe files, JSON lines, progress, quiet logs, interrupts, error reporting."""
