"""Deciding one verb call: Volcano's verb names, the one verb table (decode, decide, encode), decisions, the handlers.
May import lang, wire, session, errors, metrics and logs; never policyset, record, service, web, replay or commands.
"""
