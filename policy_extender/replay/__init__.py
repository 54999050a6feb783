"""Replaying recorded cycles through a candidate policy set, and what would change (docs/replay.md).
May import record, decide, policyset, service and fixture_runner; never web or commands.

Modules: ``reading``, ``engine``, ``comparison``, ``diff``, ``report``, ``to_fixtures``.
"""
