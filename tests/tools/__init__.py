"""Long reliability runs (``python -m tests.tools.fuzz``, ``python -m tests.tools.soak``) and the
parts the tests in ``tests/reliability`` share with them: policy generators, real wire views to
evaluate against, and the soak's client. See docs/reliability.md."""
