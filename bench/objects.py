"""Builders for the objects Volcano puts on the wire, shaped exactly like the shared samples (tests/samples).

Kubernetes objects (Pod, Node, PodGroup, Queue) are in normal k8s JSON, with ``managedFields`` as
the API server keeps them (Volcano does not strip them). Volcano objects (TaskInfo, NodeInfo,
JobInfo, QueueInfo, NamespaceInfo) use Go field names, every field emitted, milli units for
scalar resources. Every builder takes a ``random.Random`` so the caller decides determinism.
"""

from __future__ import annotations

import hashlib
import random
import uuid

EMPTY_RESOURCE = {"MilliCPU": 0, "Memory": 0, "ScalarResources": None, "MaxTaskNum": 0}
GIB = 1024 ** 3
MIB = 1024 ** 2


def new_uid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def digest(rng: random.Random) -> str:
    return hashlib.sha256(rng.getrandbits(64).to_bytes(8, "big")).hexdigest()


def timestamp(rng: random.Random, month: int = 5) -> str:
    return f"2025-{month:02d}-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}Z"


def resource(milli_cpu: float, memory: float, scalars: dict | None, max_tasks: int = 0) -> dict:
    return {"MilliCPU": milli_cpu, "Memory": memory, "ScalarResources": scalars, "MaxTaskNum": max_tasks}


def task_resource(milli_cpu: int, memory: int, gpus: int) -> dict:
    scalars = {"nvidia.com/gpu": gpus * 1000, "pods": 1} if gpus else {"pods": 1}
    return resource(milli_cpu, memory, scalars)


# --- managedFields -------------------------------------------------------------------------

def _fields_of(mapping: dict) -> dict:
    return {".": {}, **{f"f:{k}": {} for k in mapping}} if mapping else {}


def _pod_spec_fields(pod: dict) -> dict:
    containers = {}
    for c in pod["spec"]["containers"]:
        res = c["resources"]
        containers[f'k:{{"name":"{c["name"]}"}}'] = {
            ".": {}, "f:command": {}, "f:env": {},
            "f:image": {}, "f:imagePullPolicy": {}, "f:name": {},
            "f:resources": {".": {}, "f:limits": _fields_of(res.get("limits", {})), "f:requests": _fields_of(res["requests"])},
            "f:terminationMessagePath": {}, "f:terminationMessagePolicy": {},
            "f:volumeMounts": {},
        }
    owner = pod["metadata"]["ownerReferences"][0]["uid"]
    return {
        "f:metadata": {
            "f:annotations": _fields_of(pod["metadata"].get("annotations", {})),
            "f:labels": _fields_of(pod["metadata"]["labels"]),
            "f:ownerReferences": {".": {}, f'k:{{"uid":"{owner}"}}': {}},
        },
        "f:spec": {
            "f:containers": containers, "f:dnsPolicy": {}, "f:enableServiceLinks": {}, "f:priorityClassName": {},
            "f:restartPolicy": {}, "f:schedulerName": {}, "f:securityContext": {}, "f:terminationGracePeriodSeconds": {},
            "f:tolerations": {}, "f:volumes": {},
        },
    }


def _pod_status_fields(pod: dict) -> dict:
    conditions = {f'k:{{"type":"{c["type"]}"}}': {".": {}, "f:lastProbeTime": {}, "f:lastTransitionTime": {}, "f:status": {}, "f:type": {}}
                  for c in pod["status"].get("conditions", [])}
    ips = {f'k:{{"ip":"{p["ip"]}"}}': {".": {}, "f:ip": {}} for p in pod["status"].get("podIPs", [])}
    return {"f:status": {"f:conditions": conditions, "f:containerStatuses": {}, "f:hostIP": {}, "f:hostIPs": {}, "f:phase": {},
                         "f:podIP": {}, "f:podIPs": {".": {}, **ips}, "f:startTime": {}}}


def _entry(manager: str, when: str, fields: dict, subresource: str | None = None) -> dict:
    entry = {"manager": manager, "operation": "Update", "apiVersion": "v1", "time": when, "fieldsType": "FieldsV1", "fieldsV1": fields}
    if subresource:
        entry["subresource"] = subresource
    return entry


def pod_managed_fields(pod: dict, controller: str) -> list:
    created = pod["metadata"]["creationTimestamp"]
    entries = [_entry(controller, created, _pod_spec_fields(pod))]
    if pod["status"]["phase"] == "Running":
        entries.append(_entry("kubelet", pod["status"]["startTime"], _pod_status_fields(pod), "status"))
    return entries


# --- Pod -------------------------------------------------------------------------------------

SA_VOLUME_SOURCES = [
    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
    {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
]
DEFAULT_TOLERATIONS = [
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
]
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def _k8s_quantity_requests(milli_cpu: int, memory: int, gpus: int) -> tuple[dict, dict]:
    cpu = f"{milli_cpu // 1000}" if milli_cpu % 1000 == 0 else f"{milli_cpu}m"
    mem = f"{memory // GIB}Gi" if memory % GIB == 0 else f"{memory // MIB}Mi"
    requests, limits = {"cpu": cpu, "memory": mem}, {"memory": mem}
    if gpus:
        requests["nvidia.com/gpu"] = limits["nvidia.com/gpu"] = str(gpus)
    return requests, limits


def _running_status(rng: random.Random, host_ip: str, pod_ip: str, image: str) -> dict:
    start = timestamp(rng)
    conditions = [{"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": start}
                  for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")]
    return {
        "phase": "Running", "conditions": conditions, "hostIP": host_ip, "hostIPs": [{"ip": host_ip}],
        "podIP": pod_ip, "podIPs": [{"ip": pod_ip}], "startTime": start,
        "containerStatuses": [{
            "name": "main", "state": {"running": {"startedAt": start}}, "lastState": {}, "ready": True, "restartCount": 0,
            "image": image, "imageID": f"{image}@sha256:{digest(rng)}", "containerID": f"containerd://{digest(rng)}", "started": True,
        }],
        "qosClass": "Burstable",
    }


def pod(rng: random.Random, *, name: str, namespace: str, uid: str, labels: dict, annotations: dict | None,
        owner: dict, image: str, milli_cpu: int, memory: int, gpus: int, node_name: str, host_ip: str,
        pod_ip: str, priority_class: str | None, priority: int, controller: str, running: bool = True, init_container: bool = False) -> dict:
    requests, limits = _k8s_quantity_requests(milli_cpu, memory, gpus)
    volume = f"kube-api-access-{rng.getrandbits(20):05x}"
    mount = {"name": volume, "readOnly": True, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}
    container = {"name": "main", "image": image, "command": ["/bin/sh", "-c", "exec /app/run.sh"],
                 "env": [{"name": "VC_TASK_INDEX", "value": labels.get("volcano.sh/task-index", "0")}],
                 "resources": {"limits": limits, "requests": requests}, "volumeMounts": [mount],
                 "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent"}
    metadata = {"name": name, "namespace": namespace, "uid": uid, "resourceVersion": str(1000000 + rng.getrandbits(11)),
                "creationTimestamp": timestamp(rng), "labels": labels}
    if annotations:
        metadata["annotations"] = annotations
    metadata["ownerReferences"] = [owner]
    spec: dict = {"volumes": [{"name": volume, "projected": {"sources": SA_VOLUME_SOURCES, "defaultMode": 420}}]}
    if init_container:
        spec["initContainers"] = [{"name": "fetch-data", "image": "docker.io/library/python:3.11-slim", "command": ["python", "-m", "fetch"],
                                   "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}}, "volumeMounts": [mount],
                                   "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent"}]
    spec.update({"containers": [container], "restartPolicy": "OnFailure" if gpus or "volcano.sh/job-name" in labels else "Always",
                 "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst", "serviceAccountName": "default",
                 "serviceAccount": "default"})
    if node_name:
        spec["nodeName"] = node_name
    spec.update({"securityContext": {}, "schedulerName": "volcano" if "volcano.sh/job-name" in labels else "default-scheduler",
                 "tolerations": DEFAULT_TOLERATIONS + ([GPU_TOLERATION] if gpus else [])})
    if priority_class:
        spec["priorityClassName"] = priority_class
    spec.update({"priority": priority, "enableServiceLinks": True, "preemptionPolicy": "PreemptLowerPriority"})
    status = _running_status(rng, host_ip, pod_ip, image) if running else {"phase": "Pending", "qosClass": "Burstable"}
    result = {"metadata": metadata, "spec": spec, "status": status}
    metadata["managedFields"] = pod_managed_fields(result, controller)
    return result


def task_info(*, pod_obj: dict, job: str, role: str, milli_cpu: int, memory: int, gpus: int, status: int, priority: int) -> dict:
    meta = pod_obj["metadata"]
    req = task_resource(milli_cpu, memory, gpus)
    return {
        "UID": meta["uid"], "Job": job, "Name": meta["name"], "Namespace": meta["namespace"], "TaskRole": role,
        "Resreq": req, "InitResreq": task_resource(milli_cpu, memory, gpus), "DRAResreq": None, "ResourceClaimKeys": None,
        "ResourceClaimDRAResreq": None, "NodeName": pod_obj["spec"].get("nodeName", ""), "EvictionOccurred": False,
        "JobAllocatedHyperNode": "", "Status": status, "LastTransaction": None, "Priority": priority, "VolumeReady": False,
        "Preemptable": False, "BestEffort": False, "HasRestartableInitContainer": False, "SchGated": False,
        "RevocableZone": "", "NumaInfo": {"Policy": "", "ResMap": {}}, "Pod": pod_obj,
        "PodAnnotations": meta.get("annotations"), "CustomBindErrHandlerSucceeded": False,
    }


# --- Node ------------------------------------------------------------------------------------

IMAGES = [
    ("registry.k8s.io/pause:3.9", 321520), ("registry.k8s.io/kube-proxy:v1.30.4", 29035454),
    ("quay.io/prometheus/node-exporter:v1.8.1", 11724390), ("docker.io/calico/node:v3.28.0", 115238612),
    ("nvcr.io/nvidia/k8s-device-plugin:v0.15.0", 141324512), ("nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04", 89345123),
    ("nvcr.io/nvidia/pytorch:24.05-py3", 9812345678), ("docker.io/library/nginx:1.27", 71234567),
    ("ghcr.io/example/trainer:v2.3.1", 4123456789), ("ghcr.io/example/etl-worker:v1.9.0", 812345678),
    ("docker.io/bitnami/redis:7.2", 98765432), ("docker.io/grafana/promtail:3.0.0", 78123456),
    ("registry.k8s.io/coredns/coredns:v1.11.1", 18182961),
]
NODE_CONDITIONS = [
    ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
]
EPHEMERAL_ALLOCATABLE = 187136925387
EPHEMERAL_CAPACITY = 207929917440


def _node_managed_fields(node: dict, when: str) -> list:
    labels = _fields_of(node["metadata"]["labels"])
    conditions = {f'k:{{"type":"{c["type"]}"}}': {".": {}, "f:lastHeartbeatTime": {}, "f:lastTransitionTime": {}, "f:message": {}, "f:reason": {}, "f:status": {}, "f:type": {}}
                  for c in node["status"]["conditions"]}
    return [
        _entry("kubelet", when, {"f:metadata": {"f:annotations": {".": {}, "f:volumes.kubernetes.io/controller-managed-attach-detach": {}}, "f:labels": labels}}),
        _entry("kube-controller-manager", when, {"f:metadata": {"f:annotations": {"f:node.alpha.kubernetes.io/ttl": {}}}, "f:spec": {"f:podCIDR": {}, "f:podCIDRs": {".": {}, f'v:"{node["spec"]["podCIDR"]}"': {}}}}),
        _entry("kubelet", when, {"f:status": {"f:allocatable": _fields_of(node["status"]["allocatable"]), "f:capacity": _fields_of(node["status"]["capacity"]),
                                              "f:conditions": conditions, "f:images": {}, "f:nodeInfo": {"f:bootID": {}}}}, "status"),
    ]


def k8s_node(rng: random.Random, *, name: str, index: int, zone: str, pool: str, instance: str, gpu_product: str | None,
             gpus: int, milli_cpu: int, memory: int, taints: list) -> dict:
    labels = {"beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
              "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "node.example.com/pool": pool,
              "node.kubernetes.io/instance-type": instance}
    if gpu_product:
        labels.update({"nvidia.com/gpu.count": str(gpus), "nvidia.com/gpu.product": gpu_product})
    labels.update({"topology.kubernetes.io/region": "region-1", "topology.kubernetes.io/zone": zone})
    cidr = f"10.{244 + index // 65536}.{index // 256 % 256}.{index % 256}/24" if index >= 256 else f"10.244.{index}.0/24"
    spec: dict = {"podCIDR": cidr, "podCIDRs": [cidr], "providerID": f"aws:///{zone}/i-{rng.getrandbits(68):017x}"}
    if taints:
        spec["taints"] = taints
    capacity = {"cpu": str(milli_cpu // 1000 + 1), "ephemeral-storage": "203056560Ki", "hugepages-1Gi": "0", "hugepages-2Mi": "0",
                "memory": f"{(memory + 2 * GIB) // 1024}Ki", "pods": "110"}
    allocatable = {"cpu": f"{milli_cpu}m", "ephemeral-storage": str(EPHEMERAL_ALLOCATABLE), "hugepages-1Gi": "0", "hugepages-2Mi": "0",
                   "memory": f"{memory // 1024}Ki", "pods": "110"}
    if gpus:
        capacity["nvidia.com/gpu"] = allocatable["nvidia.com/gpu"] = str(gpus)
    beat = timestamp(rng, 6)
    status = {
        "capacity": capacity, "allocatable": allocatable,
        "conditions": [{"type": t, "status": s, "lastHeartbeatTime": beat, "lastTransitionTime": timestamp(rng), "reason": r, "message": m}
                       for t, s, r, m in NODE_CONDITIONS],
        "addresses": [{"type": "InternalIP", "address": f"10.0.{index // 250}.{10 + index % 250}"}, {"type": "Hostname", "address": name}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "nodeInfo": {"machineID": digest(rng)[:32], "systemUUID": new_uid(rng), "bootID": new_uid(rng),
                     "kernelVersion": "6.1.97-104.177.amzn2023.x86_64", "osImage": "Amazon Linux 2023.5.20240805",
                     "containerRuntimeVersion": "containerd://1.7.20", "kubeletVersion": "v1.30.4", "kubeProxyVersion": "v1.30.4",
                     "operatingSystem": "linux", "architecture": "amd64"},
        "images": [{"names": [f"{img.split(':')[0]}@sha256:{digest(rng)}", img], "sizeBytes": size} for img, size in IMAGES],
    }
    metadata = {"name": name, "uid": new_uid(rng), "resourceVersion": str(1000000 + rng.getrandbits(10)), "creationTimestamp": timestamp(rng, 2),
                "labels": labels,
                "annotations": {"csi.volume.kubernetes.io/nodeid": f'{{"ebs.csi.aws.com":"i-{rng.getrandbits(60):015x}"}}',
                                "node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/controller-managed-attach-detach": "true"}}
    node = {"metadata": metadata, "spec": spec, "status": status}
    metadata["managedFields"] = _node_managed_fields(node, beat)
    return node


def node_info(*, name: str, node_obj: dict, allocatable: dict, capacity: dict, used: dict, tasks: dict) -> dict:
    """``tasks`` maps "namespace/name" to TaskInfo (or to a placeholder the caller splices later)."""
    idle_scalars = {k: v - (used["ScalarResources"] or {}).get(k, 0) for k, v in allocatable["ScalarResources"].items()}
    idle = resource(allocatable["MilliCPU"] - used["MilliCPU"], allocatable["Memory"] - used["Memory"], idle_scalars, allocatable["MaxTaskNum"])
    images = {}
    for entry in node_obj["status"]["images"]:
        for image_name in entry["names"]:
            images[image_name] = {"Size": entry["sizeBytes"], "NumNodes": 1 + len(image_name) % 6, "Nodes": None}
    return {
        "Name": name, "Node": node_obj, "State": {"Phase": 1, "Reason": ""},
        "Releasing": dict(EMPTY_RESOURCE), "Pipelined": dict(EMPTY_RESOURCE), "Idle": idle, "Used": used,
        "Allocatable": allocatable, "Capacity": capacity,
        "ResourceUsage": {"MetricsTime": "0001-01-01T00:00:00Z", "CPUUsageAvg": {}, "MEMUsageAvg": {}},
        "Tasks": tasks, "NumaInfo": None, "UnassignedNumaPods": None, "NumaSchedulerInfo": None, "RevocableZone": "",
        "Others": {}, "OversubscriptionNode": False, "OfflineJobEvicting": False,
        "OversubscriptionResource": dict(EMPTY_RESOURCE), "ImageStates": dict(sorted(images.items())), "Generation": 0, "BindGeneration": 0,
    }


# --- Job, Queue, Namespace -------------------------------------------------------------------

def pod_group(rng: random.Random, *, name: str, namespace: str, job_name: str, job_uid: str, pg_uid: str, created: str,
              queue: str, min_member: int, role: str, priority_class: str, running: int, min_resources: dict | None) -> dict:
    spec = {"minMember": min_member, "minTaskMember": {role: min_member}, "queue": queue, "priorityClassName": priority_class}
    if min_resources:
        spec["minResources"] = min_resources
    if running:
        status = {"phase": "Running", "conditions": [{"type": "Scheduled", "status": "True", "transitionID": new_uid(rng),
                                                      "lastTransitionTime": timestamp(rng, 6), "reason": "tasks in gang are ready to be scheduled"}],
                  "running": running}
    else:
        status = {"phase": "Pending"}
    owner = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": job_name, "uid": job_uid, "controller": True, "blockOwnerDeletion": True}
    return {"metadata": {"name": name, "namespace": namespace, "uid": pg_uid, "resourceVersion": str(1000000 + rng.getrandbits(11)),
                         "generation": 2, "creationTimestamp": created,
                         "labels": {"volcano.sh/job-name": job_name, "volcano.sh/job-namespace": namespace},
                         "annotations": {"volcano.sh/job-version": "0"}, "ownerReferences": [owner]},
            "spec": spec, "status": status, "Version": "v1beta1"}


def job_info(*, uid: str, pg_uid: str, name: str, namespace: str, queue: str, priority: int, min_available: int, role: str,
             task_status: dict, allocated: dict, total_request: dict, created: str, podgroup: dict, tasks: dict) -> dict:
    """``tasks`` maps task UID to TaskInfo (or placeholder); ``task_status`` maps task UID to its status int.

    Each task is repeated in ``Tasks``, ``TaskStatusIndex`` and again under ``SubJobs`` (its own
    ``Tasks`` and ``TaskStatusIndex``), as current Volcano does.
    """
    index: dict = {}
    for task_uid, status in task_status.items():
        index.setdefault(str(status), {})[task_uid] = tasks[task_uid]
    sub_job = {"GID": uid, "UID": uid, "Job": uid, "MinAvailable": min_available, "Priority": priority, "MatchIndex": 0,
               "Tasks": tasks, "TaskStatusIndex": index, "AllocatedHyperNode": "", "NominatedHyperNode": "", "NetworkTopology": None}
    return {
        "UID": uid, "PgUID": pg_uid, "Name": name, "Namespace": namespace, "Queue": queue, "Priority": priority,
        "MinAvailable": min_available, "WaitingTime": None, "JobFitErrors": "", "NodesFitErrors": {}, "AllocatedHyperNode": "",
        "NetworkTopology": None, "SubJobs": {uid: sub_job}, "TaskToSubJob": {t: uid for t in tasks}, "MinSubJobs": {},
        "TaskStatusIndex": index, "Tasks": tasks, "TaskMinAvailable": {role: min_available}, "TaskMinAvailableTotal": min_available,
        "Allocated": allocated, "TotalRequest": total_request, "CreationTimestamp": created, "PodGroup": podgroup,
        "ScheduleStartTimestamp": None, "Preemptable": False, "RevocableZone": "", "Budget": {"MinAvailable": "", "MaxUnavailable": ""},
    }


def queue_info(rng: random.Random, *, name: str, weight: int, capability: dict | None, reclaimable: bool, parent: str | None,
               pending: int, running: int) -> dict:
    spec: dict = {"weight": weight}
    if capability:
        spec["capability"] = capability
    spec.update({"reclaimable": reclaimable, "guarantee": {}})
    if parent:
        spec["parent"] = parent
    status: dict = {"state": "Open"}
    if pending:
        status["pending"] = pending
    if running:
        status["running"] = running
    status.update({"reservation": {}, "allocated": {"cpu": "0", "memory": "0"}})
    queue = {"metadata": {"name": name, "uid": new_uid(rng), "resourceVersion": str(1000000 + rng.getrandbits(8)), "generation": 1,
                          "creationTimestamp": timestamp(rng, 3)}, "spec": spec, "status": status}
    return {"UID": name, "Name": name, "Weight": weight, "Weights": "", "Hierarchy": "", "Queue": queue}


def namespace_info(name: str, quota: dict) -> dict:
    return {"Name": name, "QuotaStatus": {f"{name}-quota": quota}}
