"""Replaying recorded cycles (``record/`` writes them) through a candidate policy set, and what would change (docs/replay.md):
``reading``, ``engine``, ``comparison``, ``diff``, ``report``, ``to_fixtures``. May import record, decide, policyset, service and fixture_runner; never web.
"""
