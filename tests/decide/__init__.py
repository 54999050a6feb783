"""Tests of ``policy_extender.decide``: the verb table, PolicySet, the handlers."""
