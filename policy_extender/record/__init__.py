"""Recording whole scheduling cycles from the running service (``--record DIR``, docs/replay.md).
May import session, wire, verb_names, process and errors; never service, web or replay (replay reads what it writes).

Modules: ``frames`` (the file format), ``redact``, ``recorder`` (sampling, a bounded queue, one
writer thread), ``rotation`` (the size cap) and ``capture`` (the service's hook).
"""
