"""The context a policy can read: every type, every field and its unit, in the language's terms.

This table is the one contract between three parts of the product:

* the language's checker and compiler (names, types, which decision may read what, and which
  fields a policy set reads: ``checker.Checked.reads``, as chains of (type, field) steps),
* the wire layer (``policy_extender.wire``), whose view objects expose exactly these fields as
  Python attributes, and which alone knows the Go keys behind each field (``wire/paths.py``),
* the language reference (``docs/language.md``), whose field table is generated from it.

Types are written as small strings: ``number``, ``string``, ``bool``, ``any``, ``resources``,
``counts``, an object type name (``task``, ``node``, ...), ``list[T]`` and ``map[T]`` (a map with
string keys and values of type T). Every field may be null at run time unless its type is
``number``/``bool``/``resources``/``counts``/``list[...]``/``map[...]``, which the views always
fill (zero, false, empty).
"""

from __future__ import annotations

from dataclasses import dataclass

@dataclass(frozen=True)
class Field:
    name: str
    type: str
    doc: str
    unit: str = ""
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

TYPES: dict[str, dict[str, Field]] = {
    "resources": _fields(
        Field("cpu", "number", "CPU", "cores"),
        Field("memory", "number", "memory", "bytes"),
        Field("gpu", "number", "nvidia.com/gpu", "GPUs"),
        Field("pods", "number", "pod slots", "pods"),
        Field("ephemeral_storage", "number", "ephemeral-storage", "bytes"),
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
        Field("key", "string", "taint key"),
        Field("value", "string", "taint value"),
        Field("effect", "string", "NoSchedule, PreferNoSchedule or NoExecute"),
    ),
    "toleration": _fields(
        Field("key", "string", "toleration key (null tolerates every key)"),
        Field("operator", "string", "Equal or Exists"),
        Field("value", "string", "toleration value"),
        Field("effect", "string", "effect tolerated (null: every effect)"),
    ),
    "task": _fields(
        Field("uid", "string", "task (pod) UID"),
        Field("name", "string", "pod name"),
        Field("namespace", "string", "pod namespace"),
        Field("role", "string", "task role in its job (Volcano TaskRole)"),
        Field("labels", "map[string]", "pod labels"),
        Field("annotations", "map[string]", "pod annotations"),
        Field("priority", "number", "task priority"),
        Field("priority_class", "string", "pod priorityClassName"),
        Field("requests", "resources", "resources the task requests", _RES),
        Field("init_requests", "resources", "requests including init containers", _RES),
        Field("node_selector", "map[string]", "pod spec.nodeSelector"),
        Field("tolerations", "list[toleration]", "pod spec.tolerations"),
        Field("status", "string", "Pending, Allocated, Pipelined, Binding, Bound, Running, Releasing, Succeeded, Failed or Unknown"),
        Field("preemptable", "bool", "Volcano marks the task preemptable"),
        Field("best_effort", "bool", "the task requests no resources"),
        Field("node_name", "string", "node the task is placed on (empty while pending)"),
        Field("job_id", "string", "UID of the task's job"),
        Field("job", "job", "the task's job, from the session snapshot (null with no open session), net of this cycle's events on its tasks (their status, ready_tasks, pending_tasks, allocated)", session=True),
        Field("queue", "queue", "the task's job's queue, from the session snapshot", session=True),
    ),
    "node": _fields(
        Field("name", "string", "node name"),
        Field("labels", "map[string]", "node labels"),
        Field("annotations", "map[string]", "node annotations"),
        Field("taints", "list[taint]", "node spec.taints"),
        Field("unschedulable", "bool", "node spec.unschedulable (cordoned)"),
        Field("conditions", "map[string]", "node condition type -> status (\"True\"/\"False\"/\"Unknown\")"),
        Field("ready", "bool", "Volcano's node state is Ready"),
        Field("allocatable", "resources", "allocatable resources", _RES),
        Field("capacity", "resources", "capacity", _RES),
        Field("idle", "resources", "idle (free) resources", _RES),
        Field("used", "resources", "used resources", _RES),
        Field("releasing", "resources", "resources being released", _RES),
        Field("pipelined", "resources", "resources pipelined to waiting tasks", _RES),
        Field("tasks", "list[task]", "the tasks (pods) on the node, this cycle's placements included (Volcano adds a task to its node when it allocates it, and keeps an evicted one there as Releasing): do not add session.allocations to them"),
    ),
    "job": _fields(
        Field("uid", "string", "job UID"),
        Field("name", "string", "job (PodGroup) name"),
        Field("namespace", "string", "job namespace"),
        Field("queue_name", "string", "name of the job's queue"),
        Field("queue", "queue", "the job's queue, from the session snapshot", session=True),
        Field("priority", "number", "job priority"),
        Field("min_available", "number", "gang size: tasks that must run together", "tasks"),
        Field("preemptable", "bool", "the job is preemptable"),
        Field("tasks", "list[task]", "the job's tasks; empty at enqueue for a Volcano Job (its pods are made once it is Inqueue): there read min_available and min_resources (W401)"),
        Field("ready_tasks", "number", "tasks Allocated, Binding, Bound, Running or Succeeded", "tasks"),
        Field("pending_tasks", "number", "tasks still Pending", "tasks"),
        Field("allocated", "resources", "resources allocated to the job", _RES),
        Field("total_request", "resources", "resources all the job's tasks request; 0 at enqueue for a Volcano Job (no pods until it is Inqueue): there read max(total_request.X, min_resources.X) (W401)", _RES),
        Field("min_resources", "resources", "PodGroup spec.minResources: what its minAvailable tasks request, set before the job has pods (every job asked jobEnqueueable has it)", _RES),
        Field("labels", "map[string]", "PodGroup labels"),
        Field("annotations", "map[string]", "PodGroup annotations"),
        Field("phase", "string", "PodGroup status.phase"),
    ),
    "queue": _fields(
        Field("uid", "string", "queue UID"),
        Field("name", "string", "queue name"),
        Field("weight", "number", "queue weight"),
        Field("capability", "resources", "Queue spec.capability (unset resources read as 0)", _RES),
        Field("deserved", "resources", "Queue spec.deserved", _RES),
        Field("guarantee", "resources", "Queue spec.guarantee.resource", _RES),
        Field("allocated", "resources", "Queue status.allocated", _RES),
        Field("reclaimable", "bool", "Queue spec.reclaimable"),
        Field("state", "string", "Queue status.state (Open, Closed, ...)"),
        Field("parent", "string", "Queue spec.parent"),
        Field("labels", "map[string]", "Queue labels"),
        Field("annotations", "map[string]", "Queue annotations"),
    ),
    "allocation": _fields(
        Field("task", "string", "UID of the task placed (or evicted)", session=True),
        Field("job", "string", "UID of the task's job (null for a task without one)", session=True),
        Field("queue", "string", "name of the job's queue, from the session snapshot (null when the snapshot does not know the job)", session=True),
        Field("node", "string", "name of the node the task was placed on (or evicted from)", session=True),
        Field("requests", "resources", "resources the task requests", _RES, session=True),
        Field("name", "string", "the task's pod name", session=True),
        Field("namespace", "string", "the task's pod namespace", session=True),
        Field("role", "string", "the task's role in its job (Volcano TaskRole)", session=True),
        Field("labels", "map[string]", "the task's pod labels, as its last event sent them", session=True),
        Field("annotations", "map[string]", "the task's pod annotations, as its last event sent them", session=True),
        Field("priority", "number", "the task's priority", session=True),
        Field("status", "string", "the task's status as its last event sent it (Volcano sends Allocated or Pipelined for a placement, Releasing for an eviction)", session=True),
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
    "jobcounts": _fields(
        Field("total", "number", "jobs in the queue, whatever their phase", "jobs", session=True),
        Field("pending", "number", "jobs whose PodGroup phase is Pending", "jobs", session=True),
        Field("inqueue", "number", "jobs whose PodGroup phase is Inqueue", "jobs", session=True),
        Field("running", "number", "jobs whose PodGroup phase is Running", "jobs", session=True),
        Field("completed", "number", "jobs whose PodGroup phase is Completed", "jobs", session=True),
        Field("unknown", "number", "jobs whose PodGroup phase is Unknown", "jobs", session=True),
    ),
    "cluster": _fields(
        Field("nodes", "list[node]", "every node of the session snapshot, in the snapshot's order, net of this cycle's allocations on it: its idle and used, and its tasks (a task placed this cycle is among them, one evicted this cycle is not)", session=True),
        Field("node_count", "number", "nodes in the session snapshot", "nodes", session=True),
        Field("allocatable", "resources", "allocatable resources summed over every node", _RES, session=True),
        Field("idle", "resources", "idle resources summed over every node, net of this cycle's allocations (a task allocated this cycle is no longer idle; an eviction gives back)", _RES, session=True),
        Field("used", "resources", "used resources summed over every node, net of this cycle's allocations", _RES, session=True),
        Field("queues", "map[queue]", "every queue of the session snapshot, by name (each as the queue root reads it: allocated is the Queue's status as of the open; this cycle's allocations to it are session.queues[name])", session=True),
        Field("jobs", "map[jobcounts]", "the session snapshot's jobs counted by queue name and PodGroup phase (a queue without jobs is absent: read it with ?? or as 0 through .total)", session=True),
    ),
}

#: Types that accept ``x["key"]`` and what the bracket yields.
INDEX_TYPES: dict[str, str] = {"resources": "number", "counts": "number"}

#: Rule kinds and the top-level names each may read. A name a kind does not list is a check-time
#: error ("node is not available in an enqueue rule"). ``cluster`` (the session snapshot's
#: cluster-wide facts) is readable in every kind.
DECISION_ROOTS: dict[str, dict[str, str]] = {
    "filter": {"task": "task", "node": "node", "job": "job", "queue": "queue", "session": "session",
              "cluster": "cluster"},
    "score": {"task": "task", "node": "node", "job": "job", "queue": "queue", "session": "session",
              "cluster": "cluster"},
    "victim": {"evictor": "task", "evictee": "task", "session": "session", "cluster": "cluster"},
    "preemptable": {"evictor": "task", "evictee": "task", "session": "session", "cluster": "cluster"},
    "reclaimable": {"evictor": "task", "evictee": "task", "session": "session", "cluster": "cluster"},
    "enqueue": {"job": "job", "queue": "queue", "session": "session", "cluster": "cluster"},
    "ready": {"job": "job", "queue": "queue", "session": "session", "cluster": "cluster"},
    "overused": {"queue": "queue", "session": "session", "cluster": "cluster"},
}

#: The schedulers whose verbs a policy file's rules can serve (the file's ``protocol`` statement),
#: and the rule kinds each has verbs for: kube-scheduler's extender API has filter, prioritize and
#: preempt, and no reclaim, enqueue, overused or ready.
PROTOCOL_KINDS: dict[str, frozenset[str]] = {
    "volcano": frozenset(DECISION_ROOTS),
    "kube-scheduler": frozenset({"filter", "score", "victim", "preemptable"}),
}

#: What a file without a ``protocol`` statement serves.
DEFAULT_PROTOCOLS: frozenset[str] = frozenset({"volcano"})

_ALL_FIELDS = {type_name: frozenset(fields) for type_name, fields in TYPES.items()}

#: What each scheduler sends, so what a rule of a file serving it can read: protocol -> object
#: type -> the fields it can read. A type a protocol does not list is never sent (kube-scheduler
#: sends a v1.Pod and v1.Nodes: no job, queue or session, and of the pod and nodes only what
#: ``wire`` reads off them). Volcano sends everything. A read of anything else in a file that
#: serves the protocol is a load-time error (E411; ``PROTOCOL_UNSENT`` says why and what to read).
PROTOCOL_FIELDS: dict[str, dict[str, frozenset[str]]] = {
    "volcano": _ALL_FIELDS,
    "kube-scheduler": {
        "task": frozenset({"uid", "name", "namespace", "labels", "annotations", "priority", "priority_class",
                           "requests", "init_requests", "node_selector", "tolerations", "best_effort",
                           "node_name"}),
        "node": frozenset({"name", "labels", "annotations", "taints", "unschedulable", "conditions", "ready",
                           "allocatable", "capacity"}),
        "taint": _ALL_FIELDS["taint"],
        "toleration": _ALL_FIELDS["toleration"],
        "resources": _ALL_FIELDS["resources"],
    },
}

_NO_JOB = "kube-scheduler sends a v1.Pod, which belongs to no Volcano job"
_NO_PODS = "kube-scheduler sends the v1.Node without the pods on it"
_NOT_A_TASK = "kube-scheduler sends a v1.Pod, not Volcano's TaskInfo with its"

#: For each protocol, why what it does not send cannot be known, and what to read instead (None:
#: nothing it sends says it; ``{obj}`` is the object as the rule names it, ``evictee``), by root
#: name (``job``) or ``type.field`` (``node.idle``): the message of the checker's E411.
PROTOCOL_UNSENT: dict[str, dict[str, tuple[str, str | None]]] = {
    "volcano": {},
    "kube-scheduler": {
        "job": ("kube-scheduler sends the pod and the nodes, and no Volcano job (PodGroup)", None),
        "queue": ("kube-scheduler has no queues", None),
        "session": ("kube-scheduler has no scheduling session (no snapshot, no jobs, no queues, "
                    "no allocation events)", None),
        "cluster": ("kube-scheduler sends no snapshot of the cluster, only the pod and the candidate nodes",
                    None),
        "task.role": (f"{_NO_JOB}, so it has no role in one", None),
        "task.status": (f"{_NOT_A_TASK} status", "read {obj}.node_name (empty while pending)"),
        "task.preemptable": (f"{_NOT_A_TASK} preemptable mark",
                             "read {obj}.priority, or a pod label or annotation that says it"),
        "task.job_id": (_NO_JOB, None),
        "task.job": (_NO_JOB, None),
        "task.queue": (f"{_NO_JOB} or queue", None),
        "node.idle": (_NO_PODS, "read {obj}.allocatable"),
        "node.used": (_NO_PODS, "read {obj}.allocatable"),
        "node.releasing": (_NO_PODS, None),
        "node.pipelined": (_NO_PODS, None),
        "node.tasks": (_NO_PODS, None),
    },
}


def sends(protocol: str, type_name: str, field_name: str | None = None) -> bool:
    """Whether ``protocol`` sends objects of ``type_name`` (and, given one, their field ``field_name``)."""
    fields = PROTOCOL_FIELDS[protocol].get(type_name)
    return fields is not None and (field_name is None or field_name in fields)

#: Built-in shorthands: a name that stands for an expression, written in the language itself and
#: checked like user code (so ``free_gpu`` in an enqueue rule is refused, as ``node`` is).
SHORTHANDS: dict[str, tuple[str, str]] = {
    "free_gpu": ("node.idle.gpu", "the node's idle GPUs, whole devices"),
    "free_cpu": ("node.idle.cpu", "the node's idle CPU, cores"),
    "free_memory": ("node.idle.memory", "the node's idle memory, bytes"),
    "task_gpu": ("task.requests.gpu", "GPUs the task requests, whole devices"),
}

#: The fields of ``allocation`` that the session's allocation list is indexed by, so that an
#: aggregate's ``a.<field> == x`` reads one bucket instead of every allocation.
INDEXED = ("job", "queue", "node")


def field(type_name: str, name: str) -> Field | None:
    """The field ``name`` of object type ``type_name``, or None."""
    return TYPES.get(type_name, {}).get(name)
