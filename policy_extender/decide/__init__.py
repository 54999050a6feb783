"""Deciding one verb call: verb names, the one verb table (decode, decide, encode, audit, tally), the handlers.
May import lang, wire, session, errors, metrics and logs; never policyset, record, service, web, replay or commands.
"""
