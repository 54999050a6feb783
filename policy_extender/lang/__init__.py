"""The policy language: parse → build → check → compile (``lang.compile(sources)``), and the runtime that evaluates it.
May import errors, schema and verb_names; nothing of the wire, the session or the service.
"""

from policy_extender.lang.program import Program, compile

__all__ = ["Program", "compile"]
