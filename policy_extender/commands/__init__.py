"""The subcommands of ``policy-extender``: one module per command, imported only when needed.

Each module defines ``HELP: str`` (one line), ``add_arguments(parser)`` and ``run(args) -> int``
(the exit status). A name listed here whose module is missing is skipped, so the CLI keeps
working while a command is being written.
"""

COMMANDS = ["serve", "check", "fmt", "test", "eval", "replay", "volcano-conf", "why"]


def missing_paths(command: str, paths) -> bool:
    """Say which of ``paths`` do not exist, as ``policy-extender COMMAND: ...`` on stderr; whether
    any is missing (the command then exits 2)."""
    import os
    import sys
    missing = [str(p) for p in paths if not os.path.exists(p)]
    if missing:
        print(f"policy-extender {command}: no such file or directory: {', '.join(missing)}", file=sys.stderr)
    return bool(missing)
