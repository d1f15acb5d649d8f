"""Subcommands of the `staticfleet` command line, one module each."""
