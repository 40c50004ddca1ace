"""The `conteb` command line, on top of everything: `conteb` (cli/main.py) and its subcommands."""
