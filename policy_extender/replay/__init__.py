"""Replaying recorded cycles through a candidate policy set, and what would change (docs/replay.md).
May import fixture_runner, service, policyset, record, decide, wire, verb_names, schema and errors; never web or commands.

Modules: ``reading``, ``engine``, ``comparison``, ``diff``, ``report``, ``to_fixtures``, ``kube_cases``.
"""
