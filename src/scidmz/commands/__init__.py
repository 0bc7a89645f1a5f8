"""What each CLI command does, one module per command (ARCHITECTURE.md v2)."""
