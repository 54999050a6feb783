"""Tests of ``policy_extender.commands`` and the CLI."""
