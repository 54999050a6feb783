"""docker/k8s/monitoring, checked by the real Prometheus tools (Debian's ``prometheus`` package,
which ``.ci/run`` and ``scripts/test`` install):

- ``promtool check rules`` and ``promtool test rules`` on the PrometheusRule's groups, with a
  firing and a quiet unit test per alert (tests/ops/data/alerts.test.yaml);
- a real Prometheus (started here on a loopback port, temporary config and storage, 1 s scrape
  interval, the PrometheusRule's groups loaded) scrapes a real ``policy-extender serve`` while
  real verb calls go through it, and every query of every dashboard panel returns data;
- the ServiceMonitor and the NetworkPolicy select the standalone Deployment's pods and port.
"""

from __future__ import annotations

import http.client
import json
import math
import os
import re
import shutil
import signal
import subprocess
import threading
import time
import urllib.parse
from pathlib import Path

import pytest
import yaml

from tests.support.bodies import SAMPLES
from tests.ops.test_image import free_port
from tests.ops.test_manifests import K8S, one
from tests.ops.test_serve import get, service, worker_pids  # noqa: F401  (service is a fixture)

ROOT = Path(__file__).resolve().parents[2]
MONITORING = K8S / "monitoring"
RULES = MONITORING / "prometheusrule.yaml"
DASHBOARD = MONITORING / "policy-extender-dashboard.json"
UNIT_TESTS = Path(__file__).resolve().parent / "data" / "alerts.test.yaml"

#: Being added to the service in the same round of work; until its name is in the service's
#: source, the alert and panel on it cannot see data (see calls_without_session_implemented).
CALLS_WITHOUT_SESSION = "policy_extender_calls_without_session_total"


def tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed: it comes with Debian's prometheus package "
                    "(apt-get install -y prometheus; .ci/run and scripts/test install it)")
    return path


def rule_groups() -> dict:
    return {"groups": one(RULES, "PrometheusRule")["spec"]["groups"]}


def alerts() -> dict[str, dict]:
    return {r["alert"]: r for g in rule_groups()["groups"] for r in g["rules"] if "alert" in r}


def write_rules(directory: Path, groups: dict | None = None) -> Path:
    path = directory / "rules.yaml"
    path.write_text(yaml.safe_dump(groups or rule_groups(), sort_keys=False))
    return path


def promtool_test(directory: Path, groups: dict | None = None) -> subprocess.CompletedProcess:
    write_rules(directory, groups)
    shutil.copy(UNIT_TESTS, directory / "alerts.test.yaml")
    return subprocess.run([tool("promtool"), "test", "rules", "alerts.test.yaml"], cwd=directory,
                          capture_output=True, text=True, timeout=120)


def calls_without_session_implemented() -> bool:
    return any("calls_without_session" in p.read_text() for p in (ROOT / "policy_extender").rglob("*.py"))


# ---------------------------------------------------------------------------------------------
# promtool


@pytest.mark.slow
def test_promtool_check_rules_accepts_the_prometheusrule(tmp_path):
    checked = subprocess.run([tool("promtool"), "check", "rules", str(write_rules(tmp_path))],
                             capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {sum(len(g['rules']) for g in rule_groups()['groups'])} rules found" in checked.stdout


@pytest.mark.slow
def test_promtool_unit_tests_of_every_alert_pass(tmp_path):
    tested = promtool_test(tmp_path)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout


def test_every_alert_has_a_firing_and_a_quiet_unit_test():
    cases: dict[str, set[bool]] = {}
    for test in yaml.safe_load(UNIT_TESTS.read_text())["tests"]:
        for case in test.get("alert_rule_test", []):
            cases.setdefault(case["alertname"], set()).add(bool(case["exp_alerts"]))
    assert set(cases) == set(alerts())
    for name, kinds in cases.items():
        assert kinds == {True, False}, f"{name}: needs a case where it fires and one where it does not"


@pytest.mark.parametrize("alert, broken", [
    ("PolicyExtenderErrors", ("> 0.01", "> 0.5")),
    ("PolicyExtenderLatencyNearTimeout", ("0.8 *", "2 *")),
    ("PolicyExtenderSessionsNeverClosed", ('event=~"expired|replaced"', 'event="expired"')),
    ("PolicyExtenderPolicyReloadFailing", ("== 0", "== 2")),
])
@pytest.mark.slow
def test_the_unit_tests_catch_a_broken_rule(tmp_path, alert, broken):
    groups = rule_groups()
    (rule,) = [r for g in groups["groups"] for r in g["rules"] if r.get("alert") == alert]
    assert broken[0] in rule["expr"]
    rule["expr"] = rule["expr"].replace(*broken)
    tested = promtool_test(tmp_path, groups)
    assert tested.returncode != 0 and f"alertname: {alert}" in tested.stdout + tested.stderr


def test_the_latency_alert_compares_with_the_recorded_timeout_of_the_shipped_conf():
    (record,) = [r for g in rule_groups()["groups"] for r in g["rules"] if "record" in r]
    assert record["record"] == "policy_extender:volcano_http_timeout_seconds"
    conf = yaml.safe_load((K8S / "standalone" / "volcano-scheduler.conf").read_text())
    (plugin,) = [p for t in conf["tiers"] for p in t["plugins"] if p["name"] == "extender"]
    timeout = plugin["arguments"]["extender.httpTimeout"]
    seconds = float(timeout[:-2]) / 1000 if timeout.endswith("ms") else float(timeout[:-1])
    assert timeout.endswith(("ms", "s")) and record["expr"] == f"vector({seconds:g})"
    assert record["record"] in alerts()["PolicyExtenderLatencyNearTimeout"]["expr"]


# ---------------------------------------------------------------------------------------------
# the objects select the standalone pods


def test_servicemonitor_scrapes_the_standalone_service_port():
    monitor = one(MONITORING / "servicemonitor.yaml", "ServiceMonitor")["spec"]
    service_object = one(K8S / "standalone" / "service.yaml", "Service")
    labels = service_object["metadata"]["labels"]
    assert monitor["selector"]["matchLabels"].items() <= labels.items()
    assert monitor["namespaceSelector"]["matchNames"] == ["volcano-system"]
    (endpoint,) = monitor["endpoints"]
    assert endpoint["port"] in {p["name"] for p in service_object["spec"]["ports"]}
    assert endpoint["path"] == "/metrics"
    assert labels[monitor["jobLabel"]] == "policy-extender"  # the job PolicyExtenderDown names
    assert 'job="policy-extender"' in alerts()["PolicyExtenderDown"]["expr"]


def test_metrics_networkpolicy_admits_prometheus_to_the_ops_port_alone():
    policy = one(MONITORING / "networkpolicy.yaml", "NetworkPolicy")["spec"]
    deployment = one(K8S / "standalone" / "deployment.yaml", "Deployment")
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert policy["podSelector"]["matchLabels"].items() <= pod_labels.items()
    (rule,) = policy["ingress"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert rule["ports"] == [{"protocol": "TCP", "port": ports["ops"]}]  # never the verbs' (http)
    assert ports["ops"] != ports["http"]
    assert rule["from"][0]["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": "monitoring"}


def test_dashboard_configmap_carries_the_json_with_grafanas_sidecar_label():
    k = yaml.safe_load((MONITORING / "kustomization.yaml").read_text())
    (generator,) = k["configMapGenerator"]
    assert generator["files"] == [DASHBOARD.name]
    assert k["generatorOptions"]["labels"] == {"grafana_dashboard": "1"}
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] == "policy-extender" and panel_queries(dashboard)


# ---------------------------------------------------------------------------------------------
# a real Prometheus scrapes a real service under load


def panel_queries(dashboard: dict) -> list[tuple[str, str]]:
    """(panel title, PromQL) of every target of every panel."""
    return [(p["title"], t["expr"]) for p in dashboard["panels"] if p["type"] != "row" for t in p["targets"]]


def grafana_to_promql(expr: str) -> str:
    """The dashboard's variables as Grafana would fill them for this test's Prometheus."""
    return (expr.replace("$__rate_interval", "30s").replace("$namespace", "volcano-system")
            .replace("$job", "policy-extender"))


class Prometheus:
    """``prometheus`` on a loopback port with a temporary config and storage directory."""

    def __init__(self, directory: Path, target_port: int):
        self.port = free_port()
        write_rules(directory)
        config = {
            "global": {"scrape_interval": "1s", "scrape_timeout": "900ms", "evaluation_interval": "1s"},
            "rule_files": ["rules.yaml"],
            "scrape_configs": [{
                "job_name": "policy-extender",
                "static_configs": [{"targets": [f"127.0.0.1:{target_port}"],
                                    "labels": {"namespace": "volcano-system", "pod": "policy-extender-0"}}],
            }],
        }
        (directory / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.log = open(directory / "prometheus.log", "wb")
        self.log_path = directory / "prometheus.log"
        self.process = subprocess.Popen(
            [tool("prometheus"), f"--config.file={directory / 'prometheus.yml'}",
             f"--storage.tsdb.path={directory / 'data'}", f"--web.listen-address=127.0.0.1:{self.port}",
             "--log.level=warn"],
            cwd=directory, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.log_path.read_text()
            try:
                if get(self.port, "/-/ready")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        self.stop()
        pytest.fail("prometheus not ready in 60 s:\n" + self.log_path.read_text())

    def api(self, path: str, **params) -> dict:
        status, body = get(self.port, f"/api/v1/{path}?{urllib.parse.urlencode(params)}")
        answer = json.loads(body)
        assert status == 200 and answer["status"] == "success", f"{path} {params}: {status} {answer}"
        return answer["data"]

    def query(self, expr: str) -> list[dict]:
        return self.api("query", query=expr)["result"]

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def wait_for(condition, seconds: float) -> bool:
    """Polls ``condition`` until it holds or ``seconds`` pass (scrapes and rule evaluations
    happen every second); returns whether it held."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.5)
    return True


def has_data(result: list[dict]) -> bool:
    """At least one series with a number (a panel of only NaN draws nothing)."""
    return any(not math.isnan(float(series["value"][1])) for series in result)


class Load:
    """Real Volcano calls, cycle after cycle, until stopped: every verb with the sample bodies,
    rejections, sessions replaced without a close, calls after the close, unreadable bodies."""

    def __init__(self, port: int):
        self.port = port
        self.bodies = {p.stem: p.read_bytes() for p in SAMPLES.glob("*.json")}
        self.statuses: dict[int, int] = {}
        self.cycles = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def calls(self):
        b = self.bodies
        zone_mismatch = json.loads(b["predicate"])  # the sample with every field Volcano sends
        zone_mismatch["task"]["Pod"]["metadata"]["annotations"]["scheduling.example.com/zone"] = "zone-a"
        zone_mismatch["node"]["Node"]["metadata"]["labels"]["topology.kubernetes.io/zone"] = "zone-b"
        zone_mismatch = json.dumps(zone_mismatch).encode()
        too_big = json.loads(b["jobEnqueueable"])
        too_big["job"]["TotalRequest"]["ScalarResources"] = {"nvidia.com/gpu": 24000}
        too_big = json.dumps(too_big).encode()
        yield "onSessionOpen", b["onSessionOpen"]
        yield "onSessionOpen", b["onSessionOpen"]  # the first session is replaced, never closed
        yield "jobEnqueueable", b["jobEnqueueable"]
        yield "jobEnqueueable", too_big
        for _ in range(5):
            yield "predicate", b["predicate"]
            yield "predicate", zone_mismatch
        for verb in ("prioritize", "preemptable", "reclaimable", "queueOverused", "jobReady",
                     "allocateFunc", "deallocateFunc", "jobEnqueued"):
            yield verb, b[verb]
        yield "predicate", b"{not json"
        yield "onSessionClose", b["onSessionClose"]
        yield "predicate", b["predicate"]  # after the close: no open session

    def run(self) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        while not self.stopping.is_set():
            for verb, body in self.calls():
                try:
                    connection.request("POST", f"/{verb}", body, {"Content-Type": "application/json"})
                    response = connection.getresponse()
                    response.read()
                    self.statuses[response.status] = self.statuses.get(response.status, 0) + 1
                except (OSError, http.client.HTTPException):  # a worker killed under the call
                    connection.close()
                    connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
            self.cycles += 1
            time.sleep(0.05)
        connection.close()

    def __enter__(self) -> "Load":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopping.set()
        self.thread.join(60)


@pytest.mark.slow
def test_a_real_prometheus_scraping_a_real_service_under_load_answers_every_panel(service, tmp_path):  # noqa: F811
    port, _ = service
    prometheus = Prometheus(tmp_path, port)
    try:
        with Load(port) as load:
            time.sleep(3)  # a few scrapes with calls between them
            # Prometheus has seen the workers' exit counter at 0 before one is killed
            assert wait_for(lambda: [float(s["value"][1]) for s in prometheus.query(
                "policy_extender_worker_exits_total")] == [0.0], 60), prometheus.log_path.read_text()
            victim = min(worker_pids(port))
            os.kill(victim, signal.SIGKILL)  # the master reaps it and forks a new one
            queries = [(title, grafana_to_promql(expr)) for title, expr in panel_queries(json.loads(DASHBOARD.read_text()))]
            optional = set() if calls_without_session_implemented() else {
                q for q in queries if CALLS_WITHOUT_SESSION in q[1]}
            empty = queries
            deadline = time.monotonic() + 60
            while empty and time.monotonic() < deadline:
                time.sleep(1)
                empty = [q for q in queries if q not in optional and not has_data(prometheus.query(q[1]))]
        assert load.cycles >= 3 and load.statuses.get(200, 0) > 100 and load.statuses.get(400)
        assert not empty, "panels without data:\n" + "\n".join(f"  {t}: {e}" for t, e in empty)

        # the rules loaded and evaluate without errors; the restart fired its alert
        rules = [r for g in prometheus.api("rules")["groups"] for r in g["rules"]]
        assert len(rules) == sum(len(g["rules"]) for g in rule_groups()["groups"])
        assert all(r["health"] == "ok" for r in rules), [(r["name"], r.get("lastError")) for r in rules]
        exits = lambda: [float(s["value"][1]) for s in prometheus.query("policy_extender_worker_exits_total")]  # noqa: E731
        assert wait_for(lambda: exits() == [1.0], 30), exits()
        firing = lambda: [a["metric"]["pod"] for a in prometheus.query(  # noqa: E731
            'ALERTS{alertname="PolicyExtenderWorkerRestarts", alertstate="firing"}')]
        assert wait_for(lambda: firing() == ["policy-extender-0"], 30), firing()  # the next evaluation

        # every metric the rules and the dashboard name is one the service exports
        exported = set(prometheus.api("label/__name__/values"))
        named = set()
        for expr in [e for _, e in panel_queries(json.loads(DASHBOARD.read_text()))] + \
                [r["expr"] for g in rule_groups()["groups"] for r in g["rules"]]:
            named |= {re.sub(r"_(bucket|sum|count)$", "", m) for m in re.findall(r"\bpolicy_extender_\w+", expr)}
        for name in named:
            base = {n for n in exported if n == name or re.fullmatch(re.escape(name) + r"_(bucket|sum|count)", n)}
            if name == CALLS_WITHOUT_SESSION and not calls_without_session_implemented():
                continue
            assert base, f"{name} is named by the rules or the dashboard but not exported by the service"
    finally:
        prometheus.stop()
