"""Volcano's Go field names and milli units: pruned msgspec decoders into views, encoders of the Go responses.
May import schema, errors and trace; nothing of the language's internals, the session or the service.

* ``decode``: pruned msgspec decoders per verb body -> views (``WireError`` -> HTTP 400)
* ``views``: ``TaskView``, ``NodeView``, ``JobView``, ``QueueView``, ``Resources``, ``Counts``;
  ``session_views``: ``SessionView``, ``NO_SESSION``, ``SnapshotEnv``
* ``snapshot``: onSessionOpen pruned to the job/queue read sets, as compact msgpack
* ``encode``: responses exactly as Volcano's Go client decodes them
* ``compact``: compact test input -> real wire bodies
"""

from policy_extender.errors import CompactError, WireError

__all__ = ["WireError", "CompactError"]
