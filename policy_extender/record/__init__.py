"""Recording whole scheduling cycles from the running service (``--record DIR``; docs/replay.md):
``frames`` the file format, ``redact``, ``recorder`` (sampling, bounded queue, writer thread),
``rotation`` (the size cap) and ``capture`` (the service's hook, one verb call in, one record out).
May import session, wire and errors; never service, web or replay (replay reads what it wrote)."""
