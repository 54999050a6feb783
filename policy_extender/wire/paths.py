"""Volcano's Go keys behind each field of the language (``schema.TYPES``), and how a policy set's
reads (chains of (type, field) steps, from the checker) become the wire paths its pruned decoders
keep. With Volcano's units and numeric statuses, this is all the wire layer knows of Go.

Wire paths are tuples of Go field names (the JSON keys Volcano sends), relative to the object the
field belongs to; ``"*"`` means "every value of this map / element of this list". A field whose
value is another object (``node.tasks`` is ``list[task]``) has the path to the collection; the
fields a policy reads on the elements add their own paths under it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

WirePath = tuple[str, ...]
#: one step of a read: the object type and the field read on it
Step = tuple[str, str]

#: (object type, field) -> the Go key paths the field's value is read from
WIRE: dict[Step, tuple[WirePath, ...]] = {
    ('resources', 'cpu'): (('MilliCPU',),),
    ('resources', 'memory'): (('Memory',),),
    ('resources', 'gpu'): (('ScalarResources',),),
    ('resources', 'pods'): (('ScalarResources',),),
    ('resources', 'ephemeral_storage'): (('ScalarResources',),),
    ('taint', 'key'): (('key',),),
    ('taint', 'value'): (('value',),),
    ('taint', 'effect'): (('effect',),),
    ('toleration', 'key'): (('key',),),
    ('toleration', 'operator'): (('operator',),),
    ('toleration', 'value'): (('value',),),
    ('toleration', 'effect'): (('effect',),),
    ('task', 'uid'): (('UID',),),
    ('task', 'name'): (('Name',),),
    ('task', 'namespace'): (('Namespace',),),
    ('task', 'role'): (('TaskRole',),),
    ('task', 'labels'): (('Pod', 'metadata', 'labels'),),
    ('task', 'annotations'): (('Pod', 'metadata', 'annotations'),),
    ('task', 'priority'): (('Priority',),),
    ('task', 'priority_class'): (('Pod', 'spec', 'priorityClassName'),),
    ('task', 'requests'): (('Resreq',),),
    ('task', 'init_requests'): (('InitResreq',),),
    ('task', 'node_selector'): (('Pod', 'spec', 'nodeSelector'),),
    ('task', 'tolerations'): (('Pod', 'spec', 'tolerations'),),
    ('task', 'status'): (('Status',),),
    ('task', 'preemptable'): (('Preemptable',),),
    ('task', 'best_effort'): (('BestEffort',),),
    ('task', 'node_name'): (('NodeName',),),
    ('task', 'job_id'): (('Job',),),
    ('task', 'job'): (('Job',),),
    ('task', 'queue'): (('Job',),),
    ('node', 'name'): (('Name',),),
    ('node', 'labels'): (('Node', 'metadata', 'labels'),),
    ('node', 'annotations'): (('Node', 'metadata', 'annotations'),),
    ('node', 'taints'): (('Node', 'spec', 'taints'),),
    ('node', 'unschedulable'): (('Node', 'spec', 'unschedulable'),),
    ('node', 'conditions'): (('Node', 'status', 'conditions'),),
    ('node', 'ready'): (('State',),),
    ('node', 'allocatable'): (('Allocatable',),),
    ('node', 'capacity'): (('Capacity',),),
    ('node', 'idle'): (('Idle',),),
    ('node', 'used'): (('Used',),),
    ('node', 'releasing'): (('Releasing',),),
    ('node', 'pipelined'): (('Pipelined',),),
    ('node', 'tasks'): (('Tasks', '*'),),
    ('job', 'uid'): (('UID',),),
    ('job', 'name'): (('Name',),),
    ('job', 'namespace'): (('Namespace',),),
    ('job', 'queue_name'): (('Queue',),),
    ('job', 'queue'): (('Queue',),),
    ('job', 'priority'): (('Priority',),),
    ('job', 'min_available'): (('MinAvailable',),),
    ('job', 'preemptable'): (('Preemptable',),),
    ('job', 'tasks'): (('Tasks', '*'),),
    ('job', 'ready_tasks'): (('Tasks', '*', 'Status'),),
    ('job', 'pending_tasks'): (('Tasks', '*', 'Status'),),
    ('job', 'allocated'): (('Allocated',),),
    ('job', 'total_request'): (('TotalRequest',),),
    ('job', 'min_resources'): (('PodGroup', 'spec', 'minResources'),),
    ('job', 'labels'): (('PodGroup', 'metadata', 'labels'),),
    ('job', 'annotations'): (('PodGroup', 'metadata', 'annotations'),),
    ('job', 'phase'): (('PodGroup', 'status', 'phase'),),
    ('queue', 'uid'): (('UID',),),
    ('queue', 'name'): (('Name',),),
    ('queue', 'weight'): (('Weight',),),
    ('queue', 'capability'): (('Queue', 'spec', 'capability'),),
    ('queue', 'deserved'): (('Queue', 'spec', 'deserved'),),
    ('queue', 'guarantee'): (('Queue', 'spec', 'guarantee'),),
    ('queue', 'allocated'): (('Queue', 'status', 'allocated'),),
    ('queue', 'reclaimable'): (('Queue', 'spec', 'reclaimable'),),
    ('queue', 'state'): (('Queue', 'status', 'state'),),
    ('queue', 'parent'): (('Queue', 'spec', 'parent'),),
    ('queue', 'labels'): (('Queue', 'metadata', 'labels'),),
    ('queue', 'annotations'): (('Queue', 'metadata', 'annotations'),),
    # the cluster root reads the onSessionOpen body (the snapshot), relative to its top level
    ('cluster', 'nodes'): (('Nodes', '*'),),
    ('cluster', 'node_count'): (('Nodes', '*'),),
    ('cluster', 'allocatable'): (('Nodes', '*', 'Allocatable'),),
    ('cluster', 'idle'): (('Nodes', '*', 'Idle'),),
    ('cluster', 'used'): (('Nodes', '*', 'Used'),),
    ('cluster', 'queues'): (('Queues', '*'),),
    ('cluster', 'jobs'): (('Jobs', '*', 'PodGroup', 'status', 'phase'), ('Jobs', '*', 'PodGroup', 'Status', 'Phase')),
    # an allocation is kept from its allocateFunc's task: what a rule reads of one is read of the
    # task of every allocate/deallocate event (``go_reads``: the ``placed`` paths)
    ('allocation', 'name'): (('Name',),),
    ('allocation', 'namespace'): (('Namespace',),),
    ('allocation', 'role'): (('TaskRole',),),
    ('allocation', 'labels'): (('Pod', 'metadata', 'labels'),),
    ('allocation', 'annotations'): (('Pod', 'metadata', 'annotations'),),
    ('allocation', 'priority'): (('Priority',),),
}

#: Volcano up to v1.13 marshals the PodGroup of a JobInfo and the Queue of a QueueInfo from its
#: internal API types (volcano.sh/apis ``pkg/apis/scheduling``), most of whose fields had no json
#: tags before v1.14: Go field names (``Spec.MinResources``, ``Status.State``) and the ObjectMeta
#: inline (``labels`` beside ``Spec``); ``guarantee``, ``deserved`` and ``parent`` were tagged.
#: Each of these fields is read from its v1.14 key, or else from its key here (the e2e scenarios
#: run Volcano v1.10.0's own code against both).
LEGACY_CRD: dict[WirePath, WirePath] = {
    ('PodGroup', 'spec', 'minResources'): ('PodGroup', 'Spec', 'MinResources'),
    ('PodGroup', 'metadata', 'labels'): ('PodGroup', 'labels'),
    ('PodGroup', 'metadata', 'annotations'): ('PodGroup', 'annotations'),
    ('PodGroup', 'status', 'phase'): ('PodGroup', 'Status', 'Phase'),
    ('Queue', 'spec', 'capability'): ('Queue', 'Spec', 'Capability'),
    ('Queue', 'spec', 'deserved'): ('Queue', 'Spec', 'deserved'),
    ('Queue', 'spec', 'guarantee'): ('Queue', 'Spec', 'guarantee'),
    ('Queue', 'status', 'allocated'): ('Queue', 'Status', 'Allocated'),
    ('Queue', 'spec', 'reclaimable'): ('Queue', 'Spec', 'Reclaimable'),
    ('Queue', 'status', 'state'): ('Queue', 'Status', 'State'),
    ('Queue', 'spec', 'parent'): ('Queue', 'Spec', 'parent'),
    ('Queue', 'metadata', 'labels'): ('Queue', 'labels'),
    ('Queue', 'metadata', 'annotations'): ('Queue', 'annotations'),
}
WIRE.update({step: paths + tuple(LEGACY_CRD[p] for p in paths if p in LEGACY_CRD)
             for step, paths in WIRE.items() if any(p in LEGACY_CRD for p in paths)})

#: Scalar resources that Volcano does NOT send in milli units.
PLAIN_SCALARS = frozenset({"pods"})

TASK_STATUSES: dict[int, str] = {
    1: "Pending", 2: "Allocated", 4: "Pipelined", 8: "Binding", 16: "Bound",
    32: "Running", 64: "Releasing", 128: "Succeeded", 256: "Failed", 512: "Unknown",
}


#: Wire keys every decoder keeps whatever the policies read (identity, and what the service itself
#: needs: victims are echoed whole, allocate events need the job, node and requests).
ALWAYS_READ: dict[str, tuple[WirePath, ...]] = {
    "task": (("UID",), ("Job",), ("Name",), ("Namespace",), ("NodeName",), ("Resreq",)),
    "node": (("Name",),),
    "job": (("UID",), ("Name",), ("Namespace",), ("Queue",)),
    "queue": (("UID",), ("Name",)),
}


#: What an allocate/deallocate event's decoder keeps of its task beyond ``ALWAYS_READ`` (not
#: required): its status, which the record keeps (a Pipelined task stays one in this cycle's views).
EVENT_READ: tuple[WirePath, ...] = (("Status",),)


def wire_paths(step: Step) -> tuple[WirePath, ...]:
    """The Go key paths of one field; () for a field the body does not carry (session data)."""
    return WIRE.get(step, ())


def go_paths(chain: tuple[Step, ...], whole: bool = False) -> set[WirePath]:
    """The wire paths of one read: the steps before the last give the prefix (each step's first
    path: the collection the next object sits in), the last step its own paths; ``whole``: the
    whole value at the end of ``chain`` (a resources map read by any key). A step the body does
    not carry ends the read: nothing to decode."""
    prefix: WirePath = ()
    for step in (chain if whole else chain[:-1]):
        paths = wire_paths(step)
        if not paths:
            return set()
        prefix += paths[0]
    if whole:
        return {prefix}
    return {prefix + path for path in wire_paths(chain[-1])}


#: The onSessionOpen maps the ``cluster`` root reads, and the object type of their values.
CLUSTER_MAPS: dict[str, str] = {"Nodes": "node", "Jobs": "job", "Queues": "queue"}


def go_reads(reads: Mapping[str, Iterable[tuple[tuple[Step, ...], bool]]]) -> dict[str, frozenset]:
    """{root type: frozenset of wire paths} for the checker's reads: what the rules read, and
    only that (the decoders add ``ALWAYS_READ``; a key Volcano always sends is required of a
    body when a rule reads it, ``structs.GO_KEYS``, not when only the service does).

    ``cluster`` holds the paths of the onSessionOpen body its reads need (``Nodes.*...``): empty,
    the snapshot keeps no node. What they read on a node (a job) is also read on every node (job)
    the decoders keep, so the snapshot's nodes are decoded with the predicate's node Struct (the
    nodes a worker kept from predicates are taken as they are, ``wire.open_stream``)."""
    out = {root: frozenset().union(*(go_paths(chain, whole) for chain, whole in chains))
           for root, chains in reads.items()}
    cluster = out.get("cluster", frozenset())
    for key, root in CLUSTER_MAPS.items():
        below = frozenset(path[2:] for path in cluster if path[:2] == (key, "*") and len(path) > 2)
        if below:
            out[root] = out.get(root, frozenset()) | below
    placed = placed_paths(out.pop("allocation", frozenset()), cluster)
    if placed:
        out["task"] = out.get("task", frozenset()) | placed
    out[PLACED] = placed
    return out


#: The key of a read set (``go_reads``) holding the task paths an allocate/deallocate event keeps
#: of its task (``placed_paths``); not a root: no decoder is built for it.
PLACED = "placed"


def placed_paths(allocation: Iterable[WirePath], cluster: Iterable[WirePath]) -> frozenset[WirePath]:
    """The task paths an event's record keeps beyond ``ALWAYS_READ``: what the rules read of an
    allocation (``a.labels``) and of the tasks of ``cluster.nodes`` (``n.tasks``: the tasks placed
    this cycle join them; ``cluster`` holds onSessionOpen paths). They are read of every task
    decoded too, so the event's decoder keeps them."""
    below = {path[4:] for path in cluster if path[:4] == ("Nodes", "*", "Tasks", "*") and len(path) > 4}
    return frozenset(allocation) | frozenset(below)
