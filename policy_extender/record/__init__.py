"""Recording whole scheduling cycles from the running service (``--record DIR``, docs/replay.md).
May import decide, session, wire, process and errors; never verb_names, service, web or replay (a verb is recorded by what its table entry says; replay reads
what it writes).

Modules: ``frames`` (the file format), ``redact``, ``recorder`` (sampling, a bounded queue, one
writer thread), ``rotation`` (the size cap) and ``capture`` (the service's hook).
"""
