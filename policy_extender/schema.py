"""The context a policy can read: every type, every field, its unit and the wire keys behind it.

This table is the one contract between three parts of the product:

* the language's checker and compiler (names, types, which decision may read what),
* the wire decoder (``policy_extender.wire``), whose view objects expose exactly these fields as
  Python attributes, and whose pruned decoders read only the ``wire`` paths of the fields a
  loaded policy set uses,
* the language reference (``docs/language.md``), whose field table is generated from it.

Types are written as small strings: ``number``, ``string``, ``bool``, ``any``, ``resources``,
``counts``, an object type name (``task``, ``node``, ...), ``list[T]`` and ``map[T]`` (a map with
string keys and values of type T). Every field may be null at run time unless its type is
``number``/``bool``/``resources``/``counts``/``list[...]``/``map[...]``, which the views always
fill (zero, false, empty).

Wire paths are tuples of Go field names (the JSON keys Volcano sends), relative to the object the
field belongs to; ``"*"`` means "every value of this map / element of this list". A field whose
value is another object (``node.tasks`` is ``list[task]``) lists the path to the collection; the
fields a policy reads on the elements add their own paths under it.
"""

from __future__ import annotations

from dataclasses import dataclass

WirePath = tuple[str, ...]


@dataclass(frozen=True)
class Field:
    name: str
    type: str
    doc: str
    unit: str = ""
    wire: tuple[WirePath, ...] = ()
    #: true when the value comes from the session snapshot or counters, not from the request body
    session: bool = False


def _fields(*fields: Field) -> dict[str, Field]:
    return {f.name: f for f in fields}


_RES = "whole units: cpu in cores, memory and storage in bytes, GPUs and every scalar resource in whole devices (Volcano sends them x1000), pods plain"

#: Resource names with a shorthand field on ``resources`` and ``counts``. Any other resource is
#: read with brackets and its full name: ``node.idle["nvidia.com/gpumem"]``.
RESOURCE_SHORTHANDS: dict[str, str] = {
    "cpu": "cpu",
    "memory": "memory",
    "gpu": "nvidia.com/gpu",
    "pods": "pods",
    "ephemeral_storage": "ephemeral-storage",
}

#: Scalar resources that Volcano does NOT send in milli units.
PLAIN_SCALARS = frozenset({"pods"})

TASK_STATUSES: dict[int, str] = {
    1: "Pending", 2: "Allocated", 4: "Pipelined", 8: "Binding", 16: "Bound",
    32: "Running", 64: "Releasing", 128: "Succeeded", 256: "Failed", 512: "Unknown",
}

TYPES: dict[str, dict[str, Field]] = {
    "resources": _fields(
        Field("cpu", "number", "CPU", "cores", (("MilliCPU",),)),
        Field("memory", "number", "memory", "bytes", (("Memory",),)),
        Field("gpu", "number", "nvidia.com/gpu", "GPUs", (("ScalarResources",),)),
        Field("pods", "number", "pod slots", "pods", (("ScalarResources",),)),
        Field("ephemeral_storage", "number", "ephemeral-storage", "bytes", (("ScalarResources",),)),
    ),
    "counts": _fields(
        Field("tasks", "number", "net tasks placed in this scheduling cycle: allocate events minus deallocate events; an eviction of a task that ran before the cycle counts -1, so it can be negative", "tasks"),
        Field("cpu", "number", "net CPU allocated this cycle", "cores"),
        Field("memory", "number", "net memory allocated this cycle", "bytes"),
        Field("gpu", "number", "net GPUs allocated this cycle", "GPUs"),
        Field("pods", "number", "net pod slots allocated this cycle", "pods"),
        Field("ephemeral_storage", "number", "net ephemeral storage allocated this cycle", "bytes"),
    ),
    "taint": _fields(
        Field("key", "string", "taint key", wire=(("key",),)),
        Field("value", "string", "taint value", wire=(("value",),)),
        Field("effect", "string", "NoSchedule, PreferNoSchedule or NoExecute", wire=(("effect",),)),
    ),
    "toleration": _fields(
        Field("key", "string", "toleration key (null tolerates every key)", wire=(("key",),)),
        Field("operator", "string", "Equal or Exists", wire=(("operator",),)),
        Field("value", "string", "toleration value", wire=(("value",),)),
        Field("effect", "string", "effect tolerated (null: every effect)", wire=(("effect",),)),
    ),
    "task": _fields(
        Field("uid", "string", "task (pod) UID", wire=(("UID",),)),
        Field("name", "string", "pod name", wire=(("Name",),)),
        Field("namespace", "string", "pod namespace", wire=(("Namespace",),)),
        Field("role", "string", "task role in its job (Volcano TaskRole)", wire=(("TaskRole",),)),
        Field("labels", "map[string]", "pod labels", wire=(("Pod", "metadata", "labels"),)),
        Field("annotations", "map[string]", "pod annotations", wire=(("Pod", "metadata", "annotations"),)),
        Field("priority", "number", "task priority", wire=(("Priority",),)),
        Field("priority_class", "string", "pod priorityClassName", wire=(("Pod", "spec", "priorityClassName"),)),
        Field("requests", "resources", "resources the task requests", _RES, (("Resreq",),)),
        Field("init_requests", "resources", "requests including init containers", _RES, (("InitResreq",),)),
        Field("node_selector", "map[string]", "pod spec.nodeSelector", wire=(("Pod", "spec", "nodeSelector"),)),
        Field("tolerations", "list[toleration]", "pod spec.tolerations", wire=(("Pod", "spec", "tolerations"),)),
        Field("status", "string", "Pending, Allocated, Pipelined, Binding, Bound, Running, Releasing, Succeeded, Failed or Unknown", wire=(("Status",),)),
        Field("preemptable", "bool", "Volcano marks the task preemptable", wire=(("Preemptable",),)),
        Field("best_effort", "bool", "the task requests no resources", wire=(("BestEffort",),)),
        Field("node_name", "string", "node the task is placed on (empty while pending)", wire=(("NodeName",),)),
        Field("job_id", "string", "UID of the task's job", wire=(("Job",),)),
        Field("job", "job", "the task's job, from the session snapshot (null with no open session)", wire=(("Job",),), session=True),
        Field("queue", "queue", "the task's job's queue, from the session snapshot", wire=(("Job",),), session=True),
    ),
    "node": _fields(
        Field("name", "string", "node name", wire=(("Name",),)),
        Field("labels", "map[string]", "node labels", wire=(("Node", "metadata", "labels"),)),
        Field("annotations", "map[string]", "node annotations", wire=(("Node", "metadata", "annotations"),)),
        Field("taints", "list[taint]", "node spec.taints", wire=(("Node", "spec", "taints"),)),
        Field("unschedulable", "bool", "node spec.unschedulable (cordoned)", wire=(("Node", "spec", "unschedulable"),)),
        Field("conditions", "map[string]", "node condition type -> status (\"True\"/\"False\"/\"Unknown\")", wire=(("Node", "status", "conditions"),)),
        Field("ready", "bool", "Volcano's node state is Ready", wire=(("State",),)),
        Field("allocatable", "resources", "allocatable resources", _RES, (("Allocatable",),)),
        Field("capacity", "resources", "capacity", _RES, (("Capacity",),)),
        Field("idle", "resources", "idle (free) resources", _RES, (("Idle",),)),
        Field("used", "resources", "used resources", _RES, (("Used",),)),
        Field("releasing", "resources", "resources being released", _RES, (("Releasing",),)),
        Field("pipelined", "resources", "resources pipelined to waiting tasks", _RES, (("Pipelined",),)),
        Field("tasks", "list[task]", "the tasks (pods) on the node", wire=(("Tasks", "*"),)),
    ),
    "job": _fields(
        Field("uid", "string", "job UID", wire=(("UID",),)),
        Field("name", "string", "job (PodGroup) name", wire=(("Name",),)),
        Field("namespace", "string", "job namespace", wire=(("Namespace",),)),
        Field("queue_name", "string", "name of the job's queue", wire=(("Queue",),)),
        Field("queue", "queue", "the job's queue, from the session snapshot", wire=(("Queue",),), session=True),
        Field("priority", "number", "job priority", wire=(("Priority",),)),
        Field("min_available", "number", "gang size: tasks that must run together", "tasks", (("MinAvailable",),)),
        Field("preemptable", "bool", "the job is preemptable", wire=(("Preemptable",),)),
        Field("tasks", "list[task]", "the job's tasks", wire=(("Tasks", "*"),)),
        Field("ready_tasks", "number", "tasks Allocated, Binding, Bound, Running or Succeeded", "tasks", (("Tasks", "*", "Status"),)),
        Field("pending_tasks", "number", "tasks still Pending", "tasks", (("Tasks", "*", "Status"),)),
        Field("allocated", "resources", "resources allocated to the job", _RES, (("Allocated",),)),
        Field("total_request", "resources", "resources all the job's tasks request", _RES, (("TotalRequest",),)),
        Field("min_resources", "resources", "PodGroup spec.minResources", _RES, (("PodGroup", "spec", "minResources"),)),
        Field("labels", "map[string]", "PodGroup labels", wire=(("PodGroup", "metadata", "labels"),)),
        Field("annotations", "map[string]", "PodGroup annotations", wire=(("PodGroup", "metadata", "annotations"),)),
        Field("phase", "string", "PodGroup status.phase", wire=(("PodGroup", "status", "phase"),)),
    ),
    "queue": _fields(
        Field("uid", "string", "queue UID", wire=(("UID",),)),
        Field("name", "string", "queue name", wire=(("Name",),)),
        Field("weight", "number", "queue weight", wire=(("Weight",),)),
        Field("capability", "resources", "Queue spec.capability (unset resources read as 0)", _RES, (("Queue", "spec", "capability"),)),
        Field("deserved", "resources", "Queue spec.deserved", _RES, (("Queue", "spec", "deserved"),)),
        Field("guarantee", "resources", "Queue spec.guarantee.resource", _RES, (("Queue", "spec", "guarantee"),)),
        Field("allocated", "resources", "Queue status.allocated", _RES, (("Queue", "status", "allocated"),)),
        Field("reclaimable", "bool", "Queue spec.reclaimable", wire=(("Queue", "spec", "reclaimable"),)),
        Field("state", "string", "Queue status.state (Open, Closed, ...)", wire=(("Queue", "status", "state"),)),
        Field("parent", "string", "Queue spec.parent", wire=(("Queue", "spec", "parent"),)),
        Field("labels", "map[string]", "Queue labels", wire=(("Queue", "metadata", "labels"),)),
        Field("annotations", "map[string]", "Queue annotations", wire=(("Queue", "metadata", "annotations"),)),
    ),
    "allocation": _fields(
        Field("task", "string", "UID of the task placed (or evicted)", session=True),
        Field("job", "string", "UID of the task's job (null for a task without one)", session=True),
        Field("queue", "string", "name of the job's queue, from the session snapshot (null when the snapshot does not know the job)", session=True),
        Field("node", "string", "name of the node the task was placed on (or evicted from)", session=True),
        Field("requests", "resources", "resources the task requests", _RES, session=True),
    ),
    "session": _fields(
        Field("open", "bool", "a session (onSessionOpen without onSessionClose) is open", session=True),
        Field("allocated", "counts", "everything allocated in this cycle", session=True),
        Field("queue", "counts", "allocated this cycle to the queue of the rule's job", session=True),
        Field("job", "counts", "allocated this cycle to the rule's job", session=True),
        Field("node", "counts", "allocated this cycle on the rule's node", session=True),
        Field("queues", "map[counts]", "allocated this cycle, by queue name", session=True),
        Field("jobs", "map[counts]", "allocated this cycle, by job UID", session=True),
        Field("nodes", "map[counts]", "allocated this cycle, by node name", session=True),
        Field("allocations", "list[allocation]", "the tasks placed this cycle (net +1), in the order of the events that placed them; aggregate over it to count by job and node together, or only some tasks", session=True),
        Field("evictions", "list[allocation]", "the tasks that ran before this cycle and were evicted in it (net -1), in event order", session=True),
    ),
}

#: Types that accept ``x["key"]`` and what the bracket yields.
INDEX_TYPES: dict[str, str] = {"resources": "number", "counts": "number"}

#: Rule kinds and the top-level names each may read. A name a kind does not list is a check-time
#: error ("node is not available in an enqueue rule").
DECISION_ROOTS: dict[str, dict[str, str]] = {
    "filter": {"task": "task", "node": "node", "job": "job", "queue": "queue", "session": "session"},
    "score": {"task": "task", "node": "node", "job": "job", "queue": "queue", "session": "session"},
    "victim": {"evictor": "task", "evictee": "task", "session": "session"},
    "preemptable": {"evictor": "task", "evictee": "task", "session": "session"},
    "reclaimable": {"evictor": "task", "evictee": "task", "session": "session"},
    "enqueue": {"job": "job", "queue": "queue", "session": "session"},
    "ready": {"job": "job", "queue": "queue", "session": "session"},
    "overused": {"queue": "queue", "session": "session"},
}

#: Built-in shorthands: a name that stands for an expression, written in the language itself and
#: checked like user code (so ``free_gpu`` in an enqueue rule is refused, as ``node`` is).
SHORTHANDS: dict[str, tuple[str, str]] = {
    "free_gpu": ("node.idle.gpu", "the node's idle GPUs, whole devices"),
    "free_cpu": ("node.idle.cpu", "the node's idle CPU, cores"),
    "free_memory": ("node.idle.memory", "the node's idle memory, bytes"),
    "task_gpu": ("task.requests.gpu", "GPUs the task requests, whole devices"),
}

#: Wire keys every decoder keeps whatever the policies read (identity, and what the service itself
#: needs: victims are echoed whole, allocate events need the job, node and requests).
ALWAYS_READ: dict[str, tuple[WirePath, ...]] = {
    "task": (("UID",), ("Job",), ("Name",), ("Namespace",), ("NodeName",), ("Resreq",)),
    "node": (("Name",),),
    "job": (("UID",), ("Name",), ("Namespace",), ("Queue",)),
    "queue": (("UID",), ("Name",)),
}


#: The fields of ``allocation`` that the session's allocation list is indexed by, so that an
#: aggregate's ``a.<field> == x`` reads one bucket instead of every allocation.
INDEXED = ("job", "queue", "node")


def field(type_name: str, name: str) -> Field | None:
    """The field ``name`` of object type ``type_name``, or None."""
    return TYPES.get(type_name, {}).get(name)
