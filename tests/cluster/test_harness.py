"""The real-cluster harness's own logic, without a cluster: the trace format's errors, label
selectors, and the checks fed with what the watches would report."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "e2e" / "cluster"))

from harness import checks as checks_mod  # noqa: E402
from harness.checks import Checks, quantity  # noqa: E402
from harness.observe import Observer, World  # noqa: E402
from harness.run import vcjob  # noqa: E402
from harness.trace import TraceError, load, selector  # noqa: E402

TRACES = sorted((ROOT / "e2e" / "cluster" / "traces").glob("*.trace.yaml"))


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name)
def test_every_shipped_trace_loads(path):
    trace = load(path)
    assert trace.jobs and trace.nodes and trace.duration > 0


def write(tmp_path, text: str) -> Path:
    p = tmp_path / "t.trace.yaml"
    p.write_text(text)
    return p


def test_an_unknown_key_names_the_closest_known_one(tmp_path):
    p = write(tmp_path, "duration: 1m\nnodes: []\njobs: [{name: a, tasks: [{name: w, replicass: 2}]}]\n")
    with pytest.raises(TraceError, match=r"jobs\[0\]\.tasks\[0\]: unknown key 'replicass'; did you mean 'replicas'"):
        load(p)


def test_a_bad_duration_and_an_event_with_two_actions_are_refused(tmp_path):
    with pytest.raises(TraceError, match="is not a duration"):
        load(write(tmp_path, "duration: soon\nnodes: []\njobs: []\n"))
    with pytest.raises(TraceError, match="one of apply-policies"):
        load(write(tmp_path, "duration: 1m\nnodes: []\njobs: []\nevents: [{at: 1s, cordon: n, uncordon: n}]\n"))


def test_label_selectors_read_as_kubectl_writes_them():
    s = selector("gpu=true,zone notin (a,b),!x")
    assert s({"gpu": "true", "zone": "c"})
    assert not s({"gpu": "true", "zone": "a"})
    assert not s({"gpu": "true", "zone": "c", "x": "1"})
    assert selector("annotation:scheduling.example.com/protected=true")(
        {"annotation:scheduling.example.com/protected": "true"})
    assert selector("")({})
    with pytest.raises(TraceError):
        selector("a=b c=d")


def test_quantities():
    assert quantity("500m") == 0.5 and quantity("2Gi") == 2 * 2**30 and quantity("8") == 8


def test_a_vcjob_is_what_the_admission_webhook_would_leave_and_kwok_runs_it_for_its_duration(tmp_path):
    trace = load(write(tmp_path, "duration: 1m\nnodes: []\njobs: [{name: a, queue: q, priorityClassName: hi, "
                                 "tasks: [{name: w, replicas: 3, duration: 7s, requests: {nvidia.com/gpu: '1'}}]}]\n"))
    job = vcjob(trace.jobs[0])
    spec = job["spec"]
    assert spec["schedulerName"] == "volcano" and spec["queue"] == "q" and spec["minAvailable"] == 3
    template = spec["tasks"][0]["template"]
    assert template["metadata"]["annotations"]["pod-complete.stage.kwok.x-k8s.io/delay"] == "7000ms"
    container = template["spec"]["containers"][0]
    # extended resources must have limits equal to requests, or the API server refuses the pod
    assert container["resources"]["limits"] == container["resources"]["requests"] == {"nvidia.com/gpu": "1"}


CHECKED = """
duration: 1m
settle: 5s
nodes:
  - {name: a100, labels: {gpu: a100}, capacity: {cpu: "8"}}
  - {name: t4, labels: {gpu: t4}, capacity: {cpu: "8"}}
jobs:
  - {name: train, minAvailable: 2, tasks: [{name: w, replicas: 2, labels: {e2e/gpu: "true"}}]}
invariants:
  never_bound: [{name: gpu-on-a100, pods: "e2e/gpu=true", nodes: "gpu notin (a100)"}]
  never_evicted: [{name: protected, pods: "annotation:protected=true"}]
"""


def feed(tmp_path):
    trace = load(write(tmp_path, CHECKED))
    obs = Observer.__new__(Observer)
    obs.world, obs.t0 = World(), 0.0
    c = Checks(trace, obs)
    for n in trace.nodes:
        obs._on_nodes(0.0, "ADDED", {"metadata": {"name": n["name"], "labels": n["labels"]}, "spec": {}})
    return c, obs


def pod(uid, name, node=None, annotations=None, deleting=False, phase="Running"):
    meta = {"uid": uid, "namespace": "default", "name": name, "annotations": annotations or {},
            "labels": {"volcano.sh/job-name": "train", "e2e/gpu": "true"}}
    if deleting:
        meta["deletionTimestamp"] = "now"
    return {"metadata": meta, "spec": {"nodeName": node} if node else {}, "status": {"phase": phase}}


def apply(c, obs, t, obj, typ="MODIFIED"):
    obs._on_pods(t, typ, obj)
    c.on_change(t, "pods", typ, obj)


def test_a_bind_to_a_node_the_filter_rejects_is_a_finding_and_one_it_accepts_is_not(tmp_path):
    c, obs = feed(tmp_path)
    apply(c, obs, 1.0, pod("u1", "train-w-0", "a100"))
    assert c.findings == [] and c.counted["checked never_bound gpu-on-a100"] == 1
    apply(c, obs, 2.0, pod("u2", "train-w-1", "t4"))
    assert [f.check for f in c.findings] == ["never_bound"] and "train-w-1 bound to t4" in c.findings[0].message


def test_a_bind_while_the_service_was_down_is_reported_unjudged_not_failed(tmp_path):
    c, obs = feed(tmp_path)
    c.down_windows.append([10.0, 11.0])
    apply(c, obs, 11.5, pod("u2", "train-w-1", "t4"))   # within the grace after the window
    assert c.findings == [] and len(c.unjudged) == 1
    apply(c, obs, 11.0 + checks_mod.DOWN_GRACE + 1, pod("u3", "train-w-2", "t4"))
    assert len(c.findings) == 1


def test_a_gang_short_of_min_available_beyond_the_settle_time_is_a_finding(tmp_path):
    c, obs = feed(tmp_path)
    apply(c, obs, 1.0, pod("u1", "train-w-0", "a100"))
    c.tick(3.0)
    assert c.findings == []            # within settle (5 s): Volcano may still be binding the rest
    c.tick(7.0)
    assert [f.check for f in c.findings] == ["gang"]
    c.tick(9.0)
    assert len(c.findings) == 1        # reported once
    apply(c, obs, 9.5, pod("u2", "train-w-1", "a100"))
    c.tick(20.0)
    assert len(c.findings) == 1


def test_an_evicted_protected_pod_is_a_finding_and_a_finished_one_is_not_evicted(tmp_path):
    c, obs = feed(tmp_path)
    apply(c, obs, 1.0, pod("u1", "train-w-0", "a100", {"protected": "true"}))
    apply(c, obs, 2.0, pod("u2", "train-w-1", "a100", {"protected": "true"}))
    apply(c, obs, 3.0, pod("u2", "train-w-1", "a100", {"protected": "true"}, phase="Succeeded"))
    apply(c, obs, 4.0, pod("u2", "train-w-1", "a100", {"protected": "true"}, deleting=True, phase="Succeeded"))
    assert c.findings == []
    apply(c, obs, 5.0, pod("u1", "train-w-0", "a100", {"protected": "true"}, deleting=True))
    assert [f.check for f in c.findings] == ["never_evicted"]


def test_the_evicted_expectation_selects_by_annotation_too(tmp_path):
    trace = load(write(tmp_path, CHECKED.replace(
        "  never_evicted:", "  evicted: [{name: preempted, pods: \"!annotation:protected\", min: 1}]\n  never_evicted:")))
    obs = Observer.__new__(Observer)
    obs.world, obs.t0 = World(), 0.0
    c = Checks(trace, obs)
    apply(c, obs, 1.0, pod("u1", "train-w-0", "a100", {"protected": "true"}))
    apply(c, obs, 2.0, pod("u1", "train-w-0", "a100", {"protected": "true"}, deleting=True))
    c.finish(3.0)
    assert "evicted" in [f.check for f in c.findings]   # the only eviction was of a protected pod


def test_the_container_runs_with_the_images_entrypoint_and_env_from_the_dockerfile():
    from harness.control_plane import dockerfile_image

    image = dockerfile_image()
    assert image["entrypoint"] == ["policy-extender", "serve"]
    # comments inside the continued ENV instruction are dropped, as Docker drops them
    assert image["env"]["POLICY_EXTENDER_POLICY_DIRS"] == "/etc/policy-extender/policies"
    assert image["env"]["PROMETHEUS_MULTIPROC_DIR"] == "/tmp/policy-extender-metrics"
    assert image["workdir"] == "/tmp" and image["cmd"] == []   # HEALTHCHECK's CMD is not the image's


def test_a_mount_path_is_moved_to_its_directory_in_env_values_flags_and_store_urls(tmp_path):
    from harness.control_plane import Cluster

    mounts = {"/var/run/policy-extender": tmp_path / "run", "/tmp": tmp_path / "tmp",
              "/volcano.scheduler": tmp_path / "conf"}
    rewrite = Cluster._rewrite
    assert rewrite("sqlite:/var/run/policy-extender/sessions.sqlite", mounts) == f"sqlite:{tmp_path}/run/sessions.sqlite"
    assert rewrite("/tmp/policy-extender-metrics", mounts) == f"{tmp_path}/tmp/policy-extender-metrics"
    assert rewrite("--scheduler-conf=/volcano.scheduler/volcano-scheduler.conf", mounts) == \
        f"--scheduler-conf={tmp_path}/conf/volcano-scheduler.conf"
    assert rewrite("/tmpfoo", mounts) == "/tmpfoo"          # a prefix of a name is not a path under it
    assert rewrite("127.0.0.1:8713", mounts) == "127.0.0.1:8713"
