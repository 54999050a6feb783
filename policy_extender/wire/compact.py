"""Compact test input -> real wire bodies, in the exact shape Volcano sends (see the samples).

Fixtures and tests describe objects with the policy language's names and whole units::

    task:  {name: train-0, annotations: {zone: a}, requests: {cpu: 2, memory: 4Gi, gpu: 2}}
    node:  {name: n1, labels: {zone: a}, allocatable: {gpu: 8}, tasks: [{name: other, requests: {gpu: 1}}]}

and the functions here expand them into TaskInfo / NodeInfo / JobInfo / QueueInfo dicts with Go
field names, milli units and the nulls Go emits. A value that cannot be expanded raises
``CompactError(path, message)``; ``path`` (``node.tasks[0].requests.gpu``) is relative to the
arguments of the body function called, so the fixture runner can point at the line.
"""

from __future__ import annotations

import difflib
import uuid
from collections.abc import Mapping

from .. import schema
from .paths import PLAIN_SCALARS, TASK_STATUSES
from policy_extender.errors import CompactError
from .quantity import parse_quantity

_STATUS_CODES = {name.lower(): code for code, name in TASK_STATUSES.items()}
_ALLOCATED = {2, 8, 16, 32}        # Allocated, Binding, Bound, Running: in the job's Allocated
_SHORTHANDS = schema.RESOURCE_SHORTHANDS
_TIME = "2025-06-02T08:00:00Z"

# ---------------------------------------------------------------- checking compact values


def _at(path: str, key) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else str(key)


def _mapping(value, path: str, what: str, known: frozenset | None = None) -> Mapping:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise CompactError(path, f"expected a mapping for the compact {what}, got {_kind(value)}")
    for key in value:
        if known is not None and key not in known:
            raise CompactError(_at(path, key), f"unknown key {key!r} in a compact {what}{_did_you_mean(key, known)}; "
                               f"known keys: {', '.join(sorted(known))}")
    return value


def _did_you_mean(word, choices) -> str:
    close = difflib.get_close_matches(str(word), sorted(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


#: Resource names Kubernetes itself defines besides the shorthands' (core/v1 ResourceName); any
#: other resource is an extended one, named with its domain (``nvidia.com/gpu``, ``example.com/fpga``).
_NATIVE_RESOURCES = frozenset({"storage", "ephemeral-storage"})
_NATIVE_PREFIXES = ("hugepages-", "attachable-volumes-")


def _resource_name(name: str, path: str) -> str:
    """The full name of a compact resource key; a bare word that is neither a shorthand nor a
    Kubernetes resource (``gpus``) is a slip: it would be an extended resource no node has."""
    if name in _SHORTHANDS or "/" in name or name in _NATIVE_RESOURCES or name.startswith(_NATIVE_PREFIXES):
        return _SHORTHANDS.get(name, name)
    raise CompactError(_at(path, name), f"unknown resource {name!r}{_did_you_mean(name, _SHORTHANDS)}: write "
                       f"{', '.join(_SHORTHANDS)}, or an extended resource by its full name (example.com/fpga)")


def _list(value, path: str, what: str) -> list:
    if value is None:
        return []
    if not isinstance(value, (list, tuple)):
        raise CompactError(path, f"expected a list of {what}, got {_kind(value)}")
    return list(value)


def _kind(value) -> str:
    """What a spec value is, in a fixture writer's words (subclasses too: the fixture loader's
    positioned lists and mappings)."""
    for kinds, words in ((bool, "true/false"), ((int, float), "a number"), (str, "a string"),
                         ((list, tuple), "a list"), (dict, "a mapping")):
        if isinstance(value, kinds):
            return words
    return type(value).__name__


def _string(spec: Mapping, key: str, path: str, default=""):
    value = spec.get(key, default)
    if value is not None and not isinstance(value, str):
        raise CompactError(_at(path, key), f"expected a string, got {_kind(value)}; quote it")
    return value


def _bool(spec: Mapping, key: str, path: str, default=False) -> bool:
    value = spec.get(key, default)
    if not isinstance(value, bool):
        raise CompactError(_at(path, key), f"expected true or false, got {value!r}")
    return value


def _int(spec: Mapping, key: str, path: str, default=0) -> int:
    value = spec.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise CompactError(_at(path, key), f"expected a whole number, got {value!r}")
    return value


def _number(spec: Mapping, key: str, path: str, default=0) -> int | float:
    value = spec.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise CompactError(_at(path, key), f"expected a number, got {value!r}")
    return value


def _str_map(spec: Mapping, key: str, path: str) -> dict[str, str]:
    """Labels, annotations, node selectors: string values (numbers and true/false are written
    as Kubernetes would store them)."""
    out = {}
    for name, value in _mapping(spec.get(key), _at(path, key), key).items():
        if isinstance(value, bool):
            value = "true" if value else "false"
        elif isinstance(value, (int, float)):
            value = str(value)
        elif not isinstance(value, str):
            raise CompactError(_at(_at(path, key), name), f"expected a string value, got {_kind(value)}")
        out[str(name)] = value
    return out


def _amounts(value, path: str) -> dict[str, int | float]:
    """``{cpu: 2, memory: 4Gi, gpu: 1}`` -> whole units by full resource name."""
    out = {}
    for name, amount in _mapping(value, path, "resource list").items():
        if not isinstance(name, str):
            raise CompactError(path, f"resource names are strings, got {name!r}")
        if isinstance(amount, bool) or not isinstance(amount, (int, float, str)):
            raise CompactError(_at(path, name), f"expected a number or a quantity string, got {_kind(amount)}; "
                               "write a number or a quantity like 4Gi or 500m")
        full = _resource_name(name, path)
        try:
            out[full] = parse_quantity(amount)
        except (ValueError, TypeError) as error:
            raise CompactError(_at(path, name), f"{error}; write a number or a quantity like 4Gi or 500m") from None
    return out


def _name(spec: Mapping, path: str, what: str, default: str | None = None) -> str:
    name = _string(spec, "name", path, default)
    if not name:
        raise CompactError(path, f"this compact {what} has no `name:`; give it one")
    return name


def _status(spec: Mapping, path: str, default: str) -> int:
    value = spec.get("status", default)
    if isinstance(value, int) and not isinstance(value, bool) and value in TASK_STATUSES:
        return value
    if isinstance(value, str) and value.lower() in _STATUS_CODES:
        return _STATUS_CODES[value.lower()]
    names = ", ".join(TASK_STATUSES.values())
    raise CompactError(_at(path, "status"), f"unknown task status {value!r}; one of {names}")


# ---------------------------------------------------------------- wire shapes


def resource(amounts: Mapping[str, int | float], max_tasks: int = 0) -> dict:
    """Volcano's api.Resource: millicores, bytes, scalars x1000 except pods; null scalars if none."""
    scalars = {name: (value if name in PLAIN_SCALARS else value * 1000)
               for name, value in amounts.items() if name not in ("cpu", "memory")}
    return {"MilliCPU": amounts.get("cpu", 0) * 1000, "Memory": amounts.get("memory", 0),
            "ScalarResources": scalars or None, "MaxTaskNum": max_tasks}


def quantity_text(value: int | float) -> str:
    """Whole units as a Kubernetes quantity string (``2``, ``500m``)."""
    if float(value).is_integer():
        return str(int(value))
    return f"{round(value * 1000)}m"


def quantities(amounts: Mapping[str, int | float]) -> dict[str, str]:
    return {name: quantity_text(value) for name, value in amounts.items()}


def _sum(*amounts: Mapping[str, int | float]) -> dict[str, int | float]:
    total: dict[str, int | float] = {}
    for each in amounts:
        for name, value in each.items():
            total[name] = total.get(name, 0) + value
    return total


def _minus(left: Mapping, right: Mapping) -> dict[str, int | float]:
    return {name: left.get(name, 0) - right.get(name, 0) for name in {**left, **right}}


def _uid(*parts: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "/".join(parts)))


# ---------------------------------------------------------------- task

TASK_KEYS = frozenset({"name", "namespace", "uid", "role", "labels", "annotations", "requests",
                       "init_requests", "priority", "priority_class", "status", "node_selector",
                       "tolerations", "job", "preemptable", "best_effort", "node", "node_name"})
TOLERATION_KEYS = frozenset({"key", "operator", "value", "effect", "seconds"})


def task(spec, path: str = "task", *, status: str = "Pending", node: str = "", job: str = "",
         name: str | None = "task") -> dict:
    """A compact task -> TaskInfo (with its Pod)."""
    spec = _mapping(spec, path, "task", TASK_KEYS)
    name = _name(spec, path, "task", name)
    namespace = _string(spec, "namespace", path, "default") or "default"
    uid = _string(spec, "uid", path, None) or _uid(namespace, name)
    node_name = _string(spec, "node", path, None) or _string(spec, "node_name", path, None) or node
    requests = {"pods": 1, **_amounts(spec.get("requests"), _at(path, "requests"))}
    init = _amounts(spec["init_requests"], _at(path, "init_requests")) if "init_requests" in spec else requests
    code = _status(spec, path, "Running" if node_name and status == "Pending" else status)
    priority = _int(spec, "priority", path)
    pod = _pod(spec, path, name, namespace, uid, node_name, requests, code, priority)
    return {
        "UID": uid, "Job": _string(spec, "job", path, job) or "", "Name": name, "Namespace": namespace,
        "TaskRole": _string(spec, "role", path, "") or "", "Resreq": resource(requests),
        "InitResreq": resource(init), "DRAResreq": None, "ResourceClaimKeys": None,
        "ResourceClaimDRAResreq": None, "NodeName": node_name, "EvictionOccurred": False,
        "JobAllocatedHyperNode": "", "Status": code, "LastTransaction": None, "Priority": priority,
        "VolumeReady": False, "Preemptable": _bool(spec, "preemptable", path),
        "BestEffort": _bool(spec, "best_effort", path, not any(v for k, v in requests.items() if k != "pods")),
        "HasRestartableInitContainer": False, "SchGated": False, "RevocableZone": "",
        "NumaInfo": {"Policy": "", "ResMap": {}}, "Pod": pod,
        "PodAnnotations": pod["metadata"].get("annotations"), "CustomBindErrHandlerSucceeded": False,
    }


def _pod(spec, path, name, namespace, uid, node_name, requests, code, priority) -> dict:
    metadata = {"name": name, "namespace": namespace, "uid": uid, "resourceVersion": "1",
                "creationTimestamp": _TIME}
    for key in ("labels", "annotations"):
        if spec.get(key):
            metadata[key] = _str_map(spec, key, path)
    container_requests = quantities({k: v for k, v in requests.items() if k != "pods"})
    pod_spec: dict = {"containers": [{"name": "main", "image": "registry.example.com/app:1",
                                      "resources": {"requests": container_requests} if container_requests else {}}],
                      "restartPolicy": "OnFailure", "schedulerName": "volcano"}
    if spec.get("node_selector"):
        pod_spec["nodeSelector"] = _str_map(spec, "node_selector", path)
    if node_name:
        pod_spec["nodeName"] = node_name
    tolerations = [_toleration(t, _at(_at(path, "tolerations"), i))
                   for i, t in enumerate(_list(spec.get("tolerations"), _at(path, "tolerations"), "tolerations"))]
    if tolerations:
        pod_spec["tolerations"] = tolerations
    priority_class = _string(spec, "priority_class", path, "")
    if priority_class:
        pod_spec["priorityClassName"] = priority_class
    pod_spec["priority"] = priority
    phase = {1: "Pending", 32: "Running", 128: "Succeeded", 256: "Failed"}.get(code, "Pending")
    return {"metadata": metadata, "spec": pod_spec, "status": {"phase": phase}}


def _toleration(spec, path: str) -> dict:
    spec = _mapping(spec, path, "toleration", TOLERATION_KEYS)
    out = {k: _string(spec, k, path, None) for k in ("key", "operator", "value", "effect")}
    out = {k: v for k, v in out.items() if v is not None}
    out.setdefault("operator", "Equal" if "value" in out else "Exists")
    if "seconds" in spec:
        out["tolerationSeconds"] = _int(spec, "seconds", path)
    return out


# ---------------------------------------------------------------- node

NODE_KEYS = frozenset({"name", "labels", "annotations", "taints", "unschedulable", "ready",
                       "allocatable", "idle", "used", "capacity", "releasing", "pipelined", "tasks",
                       "conditions"})
TAINT_KEYS = frozenset({"key", "value", "effect"})


def node(spec, path: str = "node") -> dict:
    """A compact node -> NodeInfo. ``used`` defaults to the tasks' requests, ``idle`` to
    ``allocatable - used``, ``capacity`` to ``allocatable``; ``pods`` defaults to 110."""
    spec = _mapping(spec, path, "node", NODE_KEYS)
    name = _name(spec, path, "node")
    tasks = [task(t, _at(_at(path, "tasks"), i), status="Running", node=name, name=None)
             for i, t in enumerate(_list(spec.get("tasks"), _at(path, "tasks"), "tasks"))]
    allocatable = {"pods": 110, **_amounts(spec.get("allocatable"), _at(path, "allocatable"))}
    requested = _sum(*(_whole(t["Resreq"]) for t in tasks))
    used = _amounts(spec["used"], _at(path, "used")) if "used" in spec else requested
    idle = _amounts(spec["idle"], _at(path, "idle")) if "idle" in spec else _minus(allocatable, used)
    capacity = _amounts(spec["capacity"], _at(path, "capacity")) if "capacity" in spec else allocatable
    ready = _bool(spec, "ready", path, True)
    max_tasks = int(allocatable.get("pods", 0))
    return {
        "Name": name, "Node": _k8s_node(spec, path, name, ready, allocatable, capacity),
        "State": {"Phase": 1 if ready else 2, "Reason": "" if ready else "NotReady"},
        "Releasing": resource(_amounts(spec.get("releasing"), _at(path, "releasing"))),
        "Pipelined": resource(_amounts(spec.get("pipelined"), _at(path, "pipelined"))),
        "Idle": resource(idle, max_tasks), "Used": resource(used),
        "Allocatable": resource(allocatable, max_tasks), "Capacity": resource(capacity, max_tasks),
        "ResourceUsage": {"MetricsTime": "0001-01-01T00:00:00Z", "CPUUsageAvg": {}, "MEMUsageAvg": {}},
        "Tasks": {f"{t['Namespace']}/{t['Name']}": t for t in tasks},
        "NumaInfo": None, "UnassignedNumaPods": None, "NumaSchedulerInfo": None, "RevocableZone": "",
        "Others": {}, "OversubscriptionNode": False, "OfflineJobEvicting": False,
        "OversubscriptionResource": resource({}), "ImageStates": {}, "Generation": 0, "BindGeneration": 0,
    }


def _whole(wire_resource: Mapping) -> dict[str, int | float]:
    """The inverse of ``resource``: whole units by full name."""
    out = {"cpu": wire_resource["MilliCPU"] / 1000, "memory": wire_resource["Memory"]}
    for name, value in (wire_resource["ScalarResources"] or {}).items():
        out[name] = value if name in PLAIN_SCALARS else value / 1000
    return out


def _k8s_node(spec, path, name, ready, allocatable, capacity) -> dict:
    metadata = {"name": name, "uid": _uid("node", name), "resourceVersion": "1", "creationTimestamp": _TIME,
                "labels": {"kubernetes.io/hostname": name, **_str_map(spec, "labels", path)}}
    if spec.get("annotations"):
        metadata["annotations"] = _str_map(spec, "annotations", path)
    node_spec: dict = {}
    taints = [_taint(t, _at(_at(path, "taints"), i))
              for i, t in enumerate(_list(spec.get("taints"), _at(path, "taints"), "taints"))]
    if taints:
        node_spec["taints"] = taints
    if _bool(spec, "unschedulable", path):
        node_spec["unschedulable"] = True
    conditions = {"MemoryPressure": "False", "DiskPressure": "False", "PIDPressure": "False",
                  "Ready": "True" if ready else "False", **_str_map(spec, "conditions", path)}
    return {"metadata": metadata, "spec": node_spec,
            "status": {"capacity": quantities(capacity), "allocatable": quantities(allocatable),
                       "conditions": [{"type": k, "status": v} for k, v in conditions.items()]}}


def _taint(spec, path: str) -> dict:
    spec = _mapping(spec, path, "taint", TAINT_KEYS)
    out = {"key": _string(spec, "key", path, None), "effect": _string(spec, "effect", path, "NoSchedule")}
    if not out["key"]:
        raise CompactError(path, "a taint needs a `key:`")
    if spec.get("value") is not None:
        out["value"] = _string(spec, "value", path)
    return out


# ---------------------------------------------------------------- job

JOB_KEYS = frozenset({"uid", "name", "namespace", "queue", "min_available", "priority", "tasks",
                      "preemptable", "labels", "annotations", "phase", "min_resources", "allocated",
                      "total_request", "priority_class"})


def job(spec, path: str = "job") -> dict:
    """A compact job -> JobInfo with its PodGroup; tasks get ``Job`` = the job's UID."""
    spec = _mapping(spec, path, "job", JOB_KEYS)
    namespace = _string(spec, "namespace", path, "default") or "default"
    uid = _string(spec, "uid", path, None)
    name = _string(spec, "name", path, None) or (uid.rsplit("/", 1)[-1] if uid else None)
    if not name:
        raise CompactError(path, "this compact job has no `name:` or `uid:`; give it one")
    uid = uid or f"{namespace}/{name}"
    spec_tasks = _list(spec.get("tasks"), _at(path, "tasks"), "tasks")
    tasks = [task({"namespace": namespace, **_mapping(t, _at(_at(path, "tasks"), i), "task")},
                  _at(_at(path, "tasks"), i), job=uid, name=f"{name}-{i}") for i, t in enumerate(spec_tasks)]
    for t in tasks:
        t["Job"] = uid
    allocated = _sum(*(_whole(t["Resreq"]) for t in tasks if t["Status"] in _ALLOCATED))
    total = _sum(*(_whole(t["Resreq"]) for t in tasks))
    if "allocated" in spec:
        allocated = _amounts(spec["allocated"], _at(path, "allocated"))
    if "total_request" in spec:
        total = _amounts(spec["total_request"], _at(path, "total_request"))
    min_available = _int(spec, "min_available", path, len(tasks) or 1)
    queue = _string(spec, "queue", path, "default") or "default"
    by_status: dict[str, dict] = {}
    for t in tasks:
        by_status.setdefault(str(t["Status"]), {})[t["UID"]] = t
    return {
        "UID": uid, "PgUID": _uid("podgroup", uid), "Name": name, "Namespace": namespace,
        "Queue": queue, "Priority": _int(spec, "priority", path), "MinAvailable": min_available,
        "WaitingTime": None, "JobFitErrors": "", "NodesFitErrors": {}, "AllocatedHyperNode": "",
        "NetworkTopology": None, "SubJobs": {}, "TaskToSubJob": {}, "MinSubJobs": {},
        "TaskStatusIndex": by_status, "Tasks": {t["UID"]: t for t in tasks},
        "TaskMinAvailable": {}, "TaskMinAvailableTotal": min_available,
        "Allocated": resource(allocated), "TotalRequest": resource(total), "CreationTimestamp": _TIME,
        "PodGroup": _podgroup(spec, path, name, namespace, queue, min_available),
        "ScheduleStartTimestamp": _TIME, "Preemptable": _bool(spec, "preemptable", path),
        "RevocableZone": "", "Budget": {"MinAvailable": "", "MaxUnavailable": ""},
    }


def _podgroup(spec, path, name, namespace, queue, min_available) -> dict:
    metadata = {"name": name, "namespace": namespace, "uid": _uid("podgroup", namespace, name),
                "resourceVersion": "1", "creationTimestamp": _TIME}
    for key in ("labels", "annotations"):
        if spec.get(key):
            metadata[key] = _str_map(spec, key, path)
    pg_spec = {"minMember": min_available, "queue": queue}
    if spec.get("priority_class"):
        pg_spec["priorityClassName"] = _string(spec, "priority_class", path)
    if spec.get("min_resources"):
        pg_spec["minResources"] = quantities(_amounts(spec["min_resources"], _at(path, "min_resources")))
    return {"metadata": metadata, "spec": pg_spec,
            "status": {"phase": _string(spec, "phase", path, "Inqueue") or "Inqueue"}, "Version": "v1beta1"}


# ---------------------------------------------------------------- queue

QUEUE_KEYS = frozenset({"name", "uid", "weight", "capability", "deserved", "guarantee", "allocated",
                        "reclaimable", "state", "parent", "labels", "annotations"})


def queue(spec, path: str = "queue") -> dict:
    """A compact queue -> QueueInfo with its Queue CRD (UID = name, as Volcano keys queues)."""
    spec = _mapping(spec, path, "queue", QUEUE_KEYS)
    name = _name(spec, path, "queue")
    weight = _int(spec, "weight", path, 1)
    metadata: dict = {"name": name, "uid": _uid("queue", name), "resourceVersion": "1", "creationTimestamp": _TIME}
    for key in ("labels", "annotations"):
        if spec.get(key):
            metadata[key] = _str_map(spec, key, path)
    queue_spec: dict = {"weight": weight}
    for key in ("capability", "deserved"):
        if key in spec:
            queue_spec[key] = quantities(_amounts(spec[key], _at(path, key)))
    queue_spec["reclaimable"] = _bool(spec, "reclaimable", path, True)
    queue_spec["guarantee"] = ({"resource": quantities(_amounts(spec["guarantee"], _at(path, "guarantee")))}
                               if "guarantee" in spec else {})
    queue_spec["parent"] = _string(spec, "parent", path, "root")
    allocated = quantities(_amounts(spec.get("allocated"), _at(path, "allocated"))) or {"cpu": "0", "memory": "0"}
    return {"UID": _string(spec, "uid", path, None) or name, "Name": name, "Weight": weight,
            "Weights": "", "Hierarchy": "",
            "Queue": {"metadata": metadata, "spec": queue_spec,
                      "status": {"state": _string(spec, "state", path, "Open"), "reservation": {},
                                 "allocated": allocated}}}


# ---------------------------------------------------------------- whole verb bodies


def predicate_body(task_spec, node_spec) -> dict:
    return {"task": task(task_spec, "task"), "node": node(node_spec, "node")}


def prioritize_body(task_spec, node_specs) -> dict:
    nodes = [node(n, f"nodes[{i}]") for i, n in enumerate(_list(node_specs, "nodes", "nodes"))]
    return {"task": task(task_spec, "task"), "nodes": nodes}


def victims_body(evictor_spec, evictee_specs) -> dict:
    """preemptable / reclaimable; evictees are Running tasks and need a name."""
    evictees = [task(e, f"evictees[{i}]", status="Running", name=None)
                for i, e in enumerate(_list(evictee_specs, "evictees", "evictees"))]
    return {"evictor": task(evictor_spec, "evictor"), "evictees": evictees}


def job_body(job_spec) -> dict:
    return {"job": job(job_spec, "job")}


def queue_body(queue_spec) -> dict:
    return {"queue": queue(queue_spec, "queue")}


def allocate_body(task_spec) -> dict:
    """allocateFunc / deallocateFunc ``{"task": TaskInfo}``; paths are relative to the task."""
    return {"task": task(task_spec, "", status="Allocated")}


def session_body(job_specs, queue_specs, node_specs) -> dict:
    """onSessionOpen: ``Jobs`` by UID, ``Queues`` by UID, ``Nodes`` by name."""
    jobs = [job(j, f"jobs[{i}]") for i, j in enumerate(_list(job_specs, "jobs", "jobs"))]
    queues = [queue(q, f"queues[{i}]") for i, q in enumerate(_list(queue_specs, "queues", "queues"))]
    nodes = [node(n, f"nodes[{i}]") for i, n in enumerate(_list(node_specs, "nodes", "nodes"))]
    namespaces = sorted({j["Namespace"] for j in jobs})
    return {"Jobs": {j["UID"]: j for j in jobs}, "Nodes": {n["Name"]: n for n in nodes},
            "Queues": {q["UID"]: q for q in queues},
            "NamespaceInfo": {ns: {"Name": ns, "QuotaStatus": None} for ns in namespaces},
            "RevocableNodes": {}, "NodeList": None}


# ---------------------------------------------------------------- kube-scheduler's bodies


def kube_pod(spec, path: str = "task", *, status: str = "Pending", name: str | None = "task") -> dict:
    """A compact task -> the ``v1.Pod`` kube-scheduler sends (``init_requests`` become an init
    container's requests)."""
    info = task(spec, path, status=status, name=name)
    pod = info["Pod"]
    pod["spec"]["schedulerName"] = "default-scheduler"
    if isinstance(spec, Mapping) and "init_requests" in spec:
        init = quantities({k: v for k, v in _amounts(spec["init_requests"], _at(path, "init_requests")).items()
                           if k != "pods"})
        pod["spec"]["initContainers"] = [{"name": "init", "image": "registry.example.com/init:1",
                                          "resources": {"requests": init} if init else {}}]
    return pod


def extender_args_body(task_spec, node_specs) -> dict:
    """kube-scheduler's filter and prioritize ``ExtenderArgs``: the pod and the ``v1.Node`` list
    (``nodeCacheCapable: false``)."""
    nodes = [node(n, f"nodes[{i}]")["Node"] for i, n in enumerate(_list(node_specs, "nodes", "nodes"))]
    return {"Pod": kube_pod(task_spec, "task"), "Nodes": {"metadata": {}, "items": nodes}, "NodeNames": None}


def kube_filter_body(task_spec, node_spec) -> dict:
    """kube-scheduler's filter ``ExtenderArgs`` of one node, a fixture case's ``task`` and ``node``
    (as Volcano's predicate case): a problem in it is named at ``node``."""
    return {"Pod": kube_pod(task_spec, "task"), "Nodes": {"metadata": {}, "items": [node(node_spec, "node")["Node"]]},
            "NodeNames": None}


#: the node of a compact evictee that names none
KUBE_VICTIM_NODE = "node-1"


def preemption_args_body(evictor_spec, evictee_specs) -> dict:
    """kube-scheduler's preempt ``ExtenderPreemptionArgs``: the evictees, Running pods, grouped
    by their ``node`` (``node-1`` when they name none), no PDB violated."""
    by_node: dict[str, dict] = {}
    for i, spec in enumerate(_list(evictee_specs, "evictees", "evictees")):
        pod = kube_pod(spec, f"evictees[{i}]", status="Running", name=None)
        pod["spec"].setdefault("nodeName", KUBE_VICTIM_NODE)
        by_node.setdefault(pod["spec"]["nodeName"], {"Pods": [], "NumPDBViolations": 0})["Pods"].append(pod)
    return {"Pod": kube_pod(evictor_spec, "evictor"), "NodeNameToVictims": by_node, "NodeNameToMetaVictims": None}
