"""The command line: argparse lives here only (``kvviz.cli.main``); every command prints the engine's JSON."""
