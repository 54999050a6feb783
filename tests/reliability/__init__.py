"""Reliability and security tests (docs/reliability.md).

pytest imports this directory as the package ``reliability`` (``tests/`` has no ``__init__``, so
``tests/`` goes on ``sys.path``), the same name as the top-level scripts package the tests share
code with (``reliability.views``, ``reliability.strategies``, ...). Adding the scripts package's
directory to this package's path makes ``reliability.<module>`` resolve to the same files either
way, with no copy."""

from pathlib import Path

__path__.append(str(Path(__file__).resolve().parents[2] / "reliability"))  # noqa: F821
