"""The ``cluster`` root: the session snapshot's cluster-wide facts, net of this cycle's allocations.

``ClusterFacts`` is what one snapshot gives, computed once per snapshot on first use (every
worker and replica loads the same snapshot bytes from the shared store, so each computes the same
facts): the node views, the sums of allocatable, idle and used over every node, the queues by
name and the jobs counted by queue and PodGroup phase. ``ClusterView`` (schema type ``cluster``)
puts this cycle's allocations on top: the counters' net amounts per node (``Counters.by_node``,
the same in every worker at the same ``seq``) are taken off each node's idle and added to its
used, and so to the sums; the tasks placed on a node this cycle join its ``tasks`` and the tasks
evicted from it leave them (``Counters.placed`` and ``evicted``, by node). An Env builds one ``ClusterView`` per picture of the session
(``cluster_view()``) and keeps it: a rule reads it at the cost of an attribute.

A node the counters name but the snapshot does not know is not a node of ``cluster``: it
changes nothing here. A snapshot kept without nodes (no loaded rule reads ``cluster.nodes``,
``node_count``, ``allocatable``, ``idle`` or ``used``) has none: ``node_count`` is 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .quantity import whole
from .resources import Resources, add_amounts, field_of

#: PodGroup phases (``status.phase``) and the ``jobcounts`` field each is counted in.
PHASES: dict[str, str] = {"Pending": "pending", "Inqueue": "inqueue", "Running": "running",
                          "Completed": "completed", "Unknown": "unknown"}


class JobCounts:
    """Schema type ``jobcounts``: a queue's jobs, in total and by PodGroup phase."""

    __slots__ = ("total", *PHASES.values())

    def __init__(self) -> None:
        self.total = self.pending = self.inqueue = self.running = self.completed = self.unknown = 0

    def __repr__(self) -> str:
        counted = ", ".join(f"{name}={getattr(self, name)}" for name in self.__slots__)
        return f"JobCounts({counted})"


def count_jobs(jobs: Iterable[Any]) -> dict[str, JobCounts]:
    """Job views counted by their queue's name (``queue_name`` resolved to a name through
    ``job.queue`` when the snapshot knows it) and phase."""
    counted: dict[str, JobCounts] = {}
    for job in jobs:
        queue = job.queue
        name = (queue.name if queue is not None else None) or job.queue_name
        if not name:
            continue
        counts = counted.get(name)
        if counts is None:
            counts = counted[name] = JobCounts()
        counts.total += 1
        phase = PHASES.get(job.phase or "")
        if phase is not None:
            setattr(counts, phase, getattr(counts, phase) + 1)
    return counted


def shifted(resources: Resources, moved: Mapping[str, int | float], sign: int) -> Resources:
    """``resources`` with ``moved`` (whole units by full name) added (``sign`` 1) or taken off (-1)."""
    if not moved:
        return resources
    amounts = resources.as_dict()
    for name, amount in moved.items():
        amounts[name] = whole(round(amounts.get(name, 0) + sign * amount, 9))
    return Resources(amounts)


class ClusterFacts:
    """One snapshot's cluster-wide facts (see the module docstring). Each part is computed the
    first time a rule reads it: a set that reads ``cluster.idle`` never counts the jobs, one that
    reads ``cluster.jobs`` never sums the nodes."""

    __slots__ = ("nodes", "names", "queues", "_jobs_of", "_jobs", "_totals")

    def __init__(self, nodes: Iterable[Any], queues: Mapping[str, Any], jobs: Iterable[Any]) -> None:
        """``nodes``: the snapshot's node views (``wire.views.NodeView``), in its order;
        ``queues``: queue views by name; ``jobs``: job views."""
        self.nodes = list(nodes)
        self.names = {node.name: i for i, node in enumerate(self.nodes) if node.name}
        self.queues = dict(queues)
        self._jobs_of = jobs
        self._jobs: dict[str, JobCounts] | None = None
        self._totals: tuple[Resources, Resources, Resources] | None = None

    @property
    def jobs(self) -> dict[str, JobCounts]:
        jobs = self._jobs
        if jobs is None:
            jobs = self._jobs = count_jobs(self._jobs_of)  # the same counts whichever thread is first
        return jobs

    @property
    def totals(self) -> tuple[Resources, Resources, Resources]:
        """Allocatable, idle and used, each summed over every node."""
        totals = self._totals
        if totals is None:
            sums: tuple[dict, dict, dict] = ({}, {}, {})
            for node in self.nodes:
                for total, key in zip(sums, ("Allocatable", "Idle", "Used")):
                    add_amounts(total, Resources.from_wire(field_of(node.raw, key)).as_dict())
            totals = self._totals = (Resources(sums[0]), Resources(sums[1]), Resources(sums[2]))
        return totals

    def view(self, by_node: Mapping[str, Any] | None = None, placed: Any = None,
             evicted: Any = None, env: Any = None) -> ClusterView:
        """The ``cluster`` root with this cycle applied: ``by_node`` (node name -> ``Counts``),
        and the tasks ``placed`` (net +1) and ``evicted`` (net -1), as ``Placements``; ``env``:
        the picture of the session the nodes are seen through (their tasks' ``job`` is net of
        the same events), else the snapshot."""
        return ClusterView(self, by_node or {}, placed, evicted, env)


class ClusterView:
    """Schema type ``cluster``: ``ClusterFacts`` net of this cycle's allocations per node: a
    node's idle and used by the counters' net amounts there, its tasks by the tasks placed on it
    (added, in event order) and evicted from it (taken out)."""

    __slots__ = ("_facts", "_moved", "_placed", "_evicted", "_env", "_nodes", "_idle", "_used")

    def __init__(self, facts: ClusterFacts, by_node: Mapping[str, Any], placed: Any = None,
                 evicted: Any = None, env: Any = None) -> None:
        self._facts, self._env = facts, env
        #: node index -> net amounts allocated on it this cycle (snapshot nodes only)
        self._moved = {facts.names[name]: counts.as_dict() for name, counts in by_node.items()
                       if name in facts.names and counts.as_dict()}
        self._placed, self._evicted = placed, evicted
        self._nodes: list | None = None
        self._idle: Resources | None = None
        self._used: Resources | None = None

    @property
    def nodes(self) -> list[Any]:
        nodes = self._nodes
        if nodes is None:
            env = self._env if self._has_tasks_moved() else None
            # with tasks moved, every node is seen through this picture: its tasks' jobs are net too
            nodes = list(self._facts.nodes) if env is None else [node.with_env(env) for node in self._facts.nodes]
            for i in self._touched():
                nodes[i] = nodes[i].net_of(self._moved.get(i, {}), self._on(self._placed, nodes[i].name),
                                           self._on(self._evicted, nodes[i].name), env)
            self._nodes = nodes  # the same list whichever thread built it first
        return nodes

    def _has_tasks_moved(self) -> bool:
        return any(placements is not None and len(placements) for placements in (self._placed, self._evicted))

    def _touched(self) -> list[int]:
        """The snapshot nodes this cycle changed: amounts moved, or a task placed or evicted."""
        names = self._facts.names
        touched = set(self._moved)
        for placements in (self._placed, self._evicted):
            if placements is not None:
                touched.update(names[name] for name in placements.keys("node") if name in names)
        return sorted(touched)

    @staticmethod
    def _on(placements: Any, name: str) -> list:
        return placements.bucket("node", name) if placements is not None else []

    @property
    def node_count(self) -> int:
        return len(self._facts.nodes)

    @property
    def allocatable(self) -> Resources:
        return self._facts.totals[0]

    @property
    def idle(self) -> Resources:
        if self._idle is None:
            self._idle = shifted(self._facts.totals[1], self._moved_total(), -1)
        return self._idle

    @property
    def used(self) -> Resources:
        if self._used is None:
            self._used = shifted(self._facts.totals[2], self._moved_total(), 1)
        return self._used

    def _moved_total(self) -> dict[str, int | float]:
        total: dict[str, int | float] = {}
        for moved in self._moved.values():
            add_amounts(total, moved)
        return total

    @property
    def queues(self) -> dict[str, Any]:
        return self._facts.queues

    @property
    def jobs(self) -> dict[str, JobCounts]:
        return self._facts.jobs

    def __repr__(self) -> str:
        return f"ClusterView({len(self._facts.nodes)} nodes, {len(self._facts.queues)} queues)"
