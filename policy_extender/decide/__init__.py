"""Deciding a verb call: the one verb table (decode, decide, encode), decision types, the policy set's evaluation, the handlers.
May import lang, wire, session and errors/metrics/logs; never policyset, service, web, record, replay or fixtures."""
