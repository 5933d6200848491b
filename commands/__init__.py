"""The commands of cli.py, a module per group of them (click lives here and in cli.py only)."""
