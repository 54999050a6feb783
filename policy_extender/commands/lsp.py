"""``policy-extender lsp``: the language server for editors, over standard input and output
(docs/editors.md). It needs pygls, installed with ``pip install 'policy-extender[lsp]'``."""

from __future__ import annotations

import argparse
import sys

HELP = "the language server for editors (LSP over stdio): diagnostics, hover, completion, definitions"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stdio", action="store_true",
                        help="talk LSP over standard input and output (the default and only transport)")


def run(args: argparse.Namespace) -> int:
    try:
        from policy_extender.lsp.server import serve_stdio  # lazy: commands/__init__
    except ImportError as error:
        print(f"policy-extender lsp: needs pygls ({error.name} is missing): "
              "pip install 'policy-extender[lsp]'", file=sys.stderr)
        return 2
    serve_stdio()
    return 0
