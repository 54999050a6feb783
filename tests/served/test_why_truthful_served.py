"""``/why`` and ``policy-extender why`` say what the answers did (issue 47 item 5), through a real
``policy-extender serve`` (gunicorn, 2 workers) over loopback, each statement checked against the
answers the service actually sent:

* kube-scheduler's preempt with no rule applied passes every proposed victim through: `why` says
  so, with their number, where it said ``0 victims permitted``;
* a Volcano preemptable with no rule applied answers Abstain: `why` says no opinion (the tier's
  other plugins chose), where it said ``0 victims permitted`` too;
* a task of a job rejected at enqueue shows its job's rejections, where `why` said ``nothing
  decided about job or task``.
"""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.bodies import SAMPLES
from tests.support.policies import write_policies
from tests.support.volcano import REPO, Server

POLICIES = {
    "volcano.policy": """\
enqueue gang: job.min_available <= 3
    reason "gang of {job.min_available} is too big"
victim low: evictee.priority < evictor.priority
    reason "{evictee.name} has priority {evictee.priority}"
    when evictor.labels["team"] == "vision"
""",
    "kube.policy": """\
protocol kube-scheduler
victim kube-low: evictee.priority < evictor.priority
    reason "{evictee.name} has priority {evictee.priority}"
    when evictor.labels["team"] == "vision"
""",
}
KUBE_PREEMPT = json.loads((Path(__file__).resolve().parents[1] / "wire" / "kube" / "preempt.json").read_bytes())
FLUSH = 0.2


def post(port: int, path: str, data: dict) -> dict:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("POST", path, body=json.dumps(data).encode(), headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        text = response.read()
        assert response.status == 200, text
        return json.loads(text) if text else {}
    finally:
        connection.close()


def why(port: int, *args: str, settled) -> str:
    """`policy-extender why ARGS` once its output ``settled`` (the workers flush every 0.2 s)."""
    deadline = time.monotonic() + 20
    while True:
        out = subprocess.run([sys.executable, "-m", "policy_extender", "why", *args, "--url", f"http://127.0.0.1:{port}"],
                             capture_output=True, text=True, cwd=REPO, timeout=60)
        if settled(out.stdout) or time.monotonic() > deadline:
            return out.stdout
        time.sleep(FLUSH)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    state = tmp_path_factory.mktemp("why-truthful")
    server = Server(state, write_policies(state / "policies", POLICIES),
                    extra_args=("--tally-flush-seconds", str(FLUSH)))
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


def test_kube_schedulers_victims_passed_through_are_counted_as_such(served):
    sent = json.loads(json.dumps(KUBE_PREEMPT))
    sent["Pod"]["metadata"]["labels"]["team"] = "audio"  # no victim rule applies
    proposed = sum(len(v["Pods"]) for v in sent["NodeNameToVictims"].values())
    nodes = len(sent["NodeNameToVictims"])
    for _ in range(2):
        answer = post(served.port, "/kube-scheduler/preempt", sent)
        assert sum(len(v["Pods"]) for v in answer["NodeNameToMetaVictims"].values()) == proposed
    line = f"the {2 * proposed} victims proposed passed through as they came"
    out = why(served.port, "ml/" + sent["Pod"]["metadata"]["name"], settled=lambda text: line in text)
    assert (f"task ml/train-7d9f-x2x4q: kube-scheduler.preempt: as evictor asked {2 * nodes} times: "
            f"{2 * nodes} with no rule applied: {line}") in out, out
    assert "victims permitted" not in out


def test_a_volcano_abstain_and_the_jobs_enqueue_rejections_are_shown_under_the_task(served):
    post(served.port, "/onSessionOpen", json.loads((SAMPLES / "onSessionOpen.json").read_bytes()))
    job = json.loads((SAMPLES / "jobEnqueueable.json").read_bytes())["job"]  # named job-002-<uid>
    for _ in range(3):
        assert post(served.port, "/jobEnqueueable", {"job": {**job, "MinAvailable": 5}}) == {"status": -1}
    victims = json.loads((SAMPLES / "preemptable.json").read_bytes())  # its evictor is no team's
    for _ in range(2):
        assert post(served.port, "/preemptable", victims) == {"status": 0, "victims": []}
    task = f"{victims['evictor']['Namespace']}/{victims['evictor']['Name']}"
    assert task == "ml/job-002-worker-0"

    def settled(text: str) -> bool:
        return "3 of 3 enqueue answers" in text and "asked 2 times" in text
    out = why(served.port, task, settled=settled)
    assert ("task ml/job-002-worker-0: preemptable: as evictor asked 2 times: 2 answered Abstain (no opinion: "
            "the tier's other plugins chose the victims)") in out, out
    assert (f"job ml/job-002 (the job of task ml/job-002-worker-0, PodGroup ml/{job['Name']}): enqueue "
            "rejected by gang (volcano.policy:1): gang of 5 is too big (3 of 3 enqueue answers)") in out, out
    assert "victims permitted" not in out and "nothing decided" not in out
