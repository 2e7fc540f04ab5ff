"""``python -m kvviz``: the command line (kvviz.cli)."""
from kvviz.cli.main import main

if __name__ == "__main__":
    raise SystemExit(main())
