"""``policy-extender``: an argparse parser with one subcommand per module of ``commands/``.

Command modules are imported lazily: building the parser imports each listed module (they keep
their own heavy imports inside ``run``), and a module that does not exist yet is skipped.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from types import ModuleType

from policy_extender import __version__
from policy_extender.commands import COMMANDS


def load_command(name: str) -> ModuleType | None:
    """The module ``policy_extender.commands.<name>`` (``-`` in a command name is ``_`` in its
    module's), or None when it is not there."""
    module_name = f"policy_extender.commands.{name.replace('-', '_')}"
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name:
            return None
        raise


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="policy-extender",
        description="Declarative scheduling policies for the Volcano scheduler's extender plugin.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        module = load_command(name)
        if module is None:
            continue
        sub = subparsers.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(sub)
        sub.set_defaults(run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "run", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        status = args.run(args)
        sys.stdout.flush()  # inside the try: what is still buffered meets the broken pipe here
        return status
    except BrokenPipeError:  # `check --format json | head`: the reader left; end quietly, as CLI tools do
        return _reader_gone()


#: The status of a process ended by SIGPIPE, as a shell reports it (128 + 13).
SIGPIPE_STATUS = 141


def _reader_gone() -> int:
    """Point stdout at /dev/null so that the interpreter's last flush of what is still buffered
    finds no broken pipe (and prints no second traceback), and answer SIGPIPE's status."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return SIGPIPE_STATUS


if __name__ == "__main__":
    sys.exit(main())
