"""Reliability and security tests (docs/reliability.md); the long runs and the code they share
live in ``tests.tools`` (``python -m tests.tools.fuzz``, ``.soak``)."""
