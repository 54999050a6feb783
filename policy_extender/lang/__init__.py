"""The policy language: parse → build → check → compile, with ``compile(sources)`` the front door;
the runtime (``runtime``, with its ``Context``) evaluates what it built. Imports errors and schema only."""

from policy_extender.lang.program import Program, compile

__all__ = ["Program", "compile"]
