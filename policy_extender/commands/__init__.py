"""The subcommands of ``policy-extender``: one module per command, imported only when needed.

Each module defines ``HELP: str`` (one line), ``add_arguments(parser)`` and ``run(args) -> int``
(the exit status). A name listed here whose module is missing is skipped, so the CLI keeps
working while a command is being written.
"""

COMMANDS = ["serve", "check", "fmt", "test", "eval", "replay", "volcano-conf"]
