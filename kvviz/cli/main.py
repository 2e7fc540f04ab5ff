"""The command line: ``python -m kvviz`` (or the ``kvviz`` script) prints the engine's JSON.

``trace MODEL --prompt "A B" --new-tokens 4`` the trace of a stepper run (kvviz.cli.trace);
``serve --requests 6 ...`` a served stream of requests (kvviz.cli.serve);
``compress --kind window …`` a smaller cache against the full one (kvviz.cli.compress);
``speculate --prompt … --gamma 4`` a speculative run (kvviz.cli.speculative);
``tail --prompt TEXT`` SmolLM2's next-token distribution through top-k and top-p (kvviz.cli.tail);
``loop --what one-word|greedy-loop|whole-run`` the Real LLM page's loop views (kvviz.cli.loop);
``export --out DIR`` the lecture script as static pages that need no server (kvviz.cli.export).

Greedy by default; ``--temperature/--top-k/--top-p`` sample instead (temperature 0 is greedy, and a
filter without a temperature samples at 1), ``--seed`` fixes the draws: the same command prints the
same output. argparse lives only in this package; the engine modules take plain arguments.
"""
from __future__ import annotations

from kvviz.cli import compress, export, loop, serve, speculative, tail, trace
from kvviz.cli.args import Parser


def main(argv: list[str] | None = None) -> int:
    p = Parser(prog="python -m kvviz",
               description="Export a generation trace, serve, compare smaller caches or speculate, as JSON.")
    sub = p.add_subparsers(dest="cmd", required=True, parser_class=Parser)
    for command in (trace, serve, compress, speculative, tail, loop, export):
        command.add_command(sub)
    a = p.parse_args(argv)
    return a.run(a)
