"""The subcommands of ``policy-extender``: one module per command (HELP, add_arguments, run).
May import web, replay, lsp, fixture_runner, policyset, decide, lang, gunicorn_conf, config, verb_names, instance,
logs and errors; only ``cli`` imports them.

Each module defines ``HELP: str`` (one line), ``add_arguments(parser)`` and ``run(args) -> int``
(the exit status). A name listed here whose module is missing is skipped, so the CLI keeps
working while a command is being written.

Building the parser imports every command module, so a command module imports what only its
``run`` needs inside ``run`` (marked ``# lazy: commands/__init__``): measured on this machine, a
fresh interpreter spends 240-290 ms importing the fixture runner, 250 ms the policy set
(lark, msgspec, the verb table), 260 ms the web app (flask) and 100 ms gunicorn; ``policy-extender
--help`` takes 0.08-0.09 s with these kept out.
"""
import os
import sys

COMMANDS = ["serve", "check", "fmt", "test", "eval", "replay", "configmap", "volcano-conf", "kube-scheduler-conf",
            "why", "lsp", "simulate"]


def missing_paths(command: str, paths) -> bool:
    """Say which of ``paths`` do not exist, as ``policy-extender COMMAND: ...`` on stderr; whether
    any is missing (the command then exits 2)."""
    missing = [str(p) for p in paths if not os.path.exists(p)]
    if missing:
        print(f"policy-extender {command}: no such file or directory: {', '.join(missing)}", file=sys.stderr)
    return bool(missing)
