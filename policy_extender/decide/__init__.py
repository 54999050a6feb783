"""Deciding one verb call: Volcano's verb names, the one verb table (decode, decide, encode), decisions, the handlers.
May import lang, wire, session, verb_names, errors, metrics, logs and trace; never policyset, record, service,
web, replay or commands.
"""
