"""This cycle's counters: the allocations of a session added up per queue, job and node.

The sums and the ``session`` view are the wire layer's ``Tally`` / ``SessionView`` / ``Counts``
(one implementation of the schema's ``counts`` and ``session`` types for the whole product).
What this module adds is the queue: an allocate event names the task's job, not its queue, so
the queue comes from the session snapshot.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from policy_extender.session.allocation import Allocation
from policy_extender.wire.session import Allocation as QueuedAllocation
from policy_extender.wire.session import Tally


def tally(allocations: Iterable[Allocation], queue_of_job: Callable[[str], str | None]) -> Tally:
    """Sum ``allocations``; ``queue_of_job`` maps a job UID to its queue name (None: unknown job,
    counted in the totals, its job and node, but in no queue)."""
    return Tally(QueuedAllocation(getattr(allocation, "task_uid", ""), allocation.job_uid,
                                  queue_of_job(allocation.job_uid) or "", allocation.node_name,
                                  allocation.resources)
                 for allocation in allocations)
