"""Reliability and security tests (docs/reliability.md); the long runs and the code they share
live in the top-level ``reliability`` package (``python -m reliability.fuzz``, ``.soak``)."""
