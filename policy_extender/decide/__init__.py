"""Deciding one verb call: the one verb table (decode, decide, encode, audit, tally), decisions, the handlers.
May import lang, wire, session, verb_names, schema, errors, metrics, logs, process and trace; never policyset, record, service,
web, replay or commands.
"""
