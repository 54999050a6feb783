"""The Kubernetes manifests, the Dockerfile and the build context agree with the service.

What a cluster would check at apply time is checked here without one: YAML parses, every file a
kustomization names exists, ``kubectl kustomize`` renders (when kubectl is installed), probes hit
real routes, the scheduler's URL and verbs match the service's bind and verb paths, the policies
ConfigMap holds the repository's policies and they compile, and the sidecar patch merges into
Volcano's own scheduler Deployment.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from policy_extender.config import VERB_KINDS, Config
from policy_extender.policyset import compile_sources

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "docker" / "k8s"
DATA = Path(__file__).resolve().parent / "data"
KUSTOMIZATIONS = sorted(K8S.rglob("kustomization.yaml"))
MANIFESTS = sorted(p for p in K8S.rglob("*.yaml"))
CONFS = {"sidecar": K8S / "sidecar" / "volcano-scheduler.conf",
         "standalone": K8S / "standalone" / "volcano-scheduler.conf"}
KUBECTL = shutil.which("kubectl")
needs_kubectl = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")

#: Every argument of Volcano's extender plugin (pkg/scheduler/plugins/extender/extender.go).
EXTENDER_ARGUMENTS = {"extender.urlPrefix", "extender.httpTimeout", "extender.ignorable", "extender.managedResources",
                      *(f"extender.{kind}Verb" for kind in VERB_KINDS)}  # a verb of the table each
#: Left out of the shipped conf on purpose (its comment says why: with ignorable: true a failed
#: jobReady call answers false and stops allocation); tests/tiers checks that it stays out.
UNREGISTERED = {"extender.jobReadyVerb"}


def load(path: Path) -> list[dict]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


def one(path: Path, kind: str) -> dict:
    (doc,) = [d for d in load(path) if d["kind"] == kind]
    return doc


def container(pod_spec: dict, name: str = "policy-extender") -> dict:
    (found,) = [c for c in pod_spec["containers"] if c["name"] == name]
    return found


def env(c: dict) -> dict:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in c.get("env", [])}


def extender_arguments(conf: Path) -> dict:
    tiers = yaml.safe_load(conf.read_text())["tiers"]
    (plugin,) = [p for tier in tiers for p in tier["plugins"] if p["name"] == "extender"]
    return plugin["arguments"]


def service_routes() -> set[str]:
    from policy_extender.web import create_app
    app = create_app(Config(policy_dirs=(str(K8S / "policies"),)), start=False)
    return {rule.rule for rule in app.url_map.iter_rules()}


def probe_url(probe: dict, c: dict, pod_bind: str | None = None) -> tuple[str, int, str]:
    """(host, port, path) a probe asks; httpGet probes go to the pod IP."""
    if "httpGet" in probe:
        port = probe["httpGet"]["port"]
        ports = {p["name"]: p["containerPort"] for p in c["ports"]}
        return "pod-ip", ports.get(port, port), probe["httpGet"]["path"]
    (url,) = re.findall(r"'(http://[^']+)'", " ".join(probe["exec"]["command"]))
    parts = urlsplit(url)
    return parts.hostname, parts.port, parts.path


# ---------------------------------------------------------------------------------------------
# files


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: str(p.relative_to(K8S)))
def test_every_manifest_parses_as_kubernetes_objects(path):
    docs = load(path)
    assert docs, f"{path} is empty"
    for doc in docs:
        assert doc.get("apiVersion") and doc.get("kind"), f"{path}: object without apiVersion/kind"


@pytest.mark.parametrize("path", KUSTOMIZATIONS, ids=lambda p: str(p.relative_to(K8S)))
def test_kustomization_names_only_files_that_exist(path):
    k = yaml.safe_load(path.read_text())
    named = list(k.get("resources", [])) + [p["path"] for p in k.get("patches", []) if "path" in p]
    named += [f.split("=")[-1] for g in k.get("configMapGenerator", []) for f in g.get("files", [])]
    assert named
    for entry in named:
        target = path.parent / entry
        assert target.exists(), f"{path}: {entry} does not exist"
        if target.is_dir():
            assert (target / "kustomization.yaml").exists(), f"{path}: {entry} has no kustomization"


@needs_kubectl
@pytest.mark.parametrize("path", KUSTOMIZATIONS, ids=lambda p: str(p.relative_to(K8S)))
@pytest.mark.slow
def test_kustomize_renders(path):
    rendered = subprocess.run([KUBECTL, "kustomize", str(path.parent)], capture_output=True,
                              text=True, timeout=60)
    assert rendered.returncode == 0, rendered.stderr
    for doc in yaml.safe_load_all(rendered.stdout):
        assert doc["metadata"]["namespace"] == "volcano-system"


# ---------------------------------------------------------------------------------------------
# the policies ConfigMap


def configmap_policies() -> dict[str, str]:
    """{file name: text} of the policies ConfigMap, rendered by kustomize when possible."""
    if KUBECTL:
        out = subprocess.run([KUBECTL, "kustomize", str(K8S / "policies")], check=True,
                             capture_output=True, text=True, timeout=60).stdout
        (cm,) = [d for d in yaml.safe_load_all(out) if d["metadata"]["name"] == "policy-extender-policies"]
        return cm["data"]
    return one(K8S / "policies" / "configmap.yaml", "ConfigMap")["data"]


@pytest.mark.slow
def test_configmap_policies_are_the_repository_policies():
    repository = {p.name: p.read_text() for p in sorted((ROOT / "policies").glob("*.policy"))}
    assert repository, "policies/*.policy is empty"
    assert configmap_policies() == repository, \
        "run: policy-extender configmap policies > docker/k8s/policies/configmap.yaml"


@pytest.mark.slow
def test_configmap_policies_compile():
    policy_set = compile_sources(configmap_policies())
    assert policy_set.rules


@pytest.mark.parametrize("mode", ["sidecar", "standalone"])
def test_policies_are_mounted_as_a_directory_where_the_service_reads_them(mode):
    pod, c = pod_and_container(mode)
    (volume,) = [v for v in pod["volumes"] if v.get("configMap", {}).get("name") == "policy-extender-policies"]
    (mount,) = [m for m in c["volumeMounts"] if m["name"] == volume["name"]]
    assert "subPath" not in mount, "subPath mounts never see ConfigMap updates"
    assert env(c)["POLICY_EXTENDER_POLICY_DIRS"] == mount["mountPath"]


# ---------------------------------------------------------------------------------------------
# the scheduler's configuration


@pytest.mark.parametrize("mode", CONFS)
def test_scheduler_conf_sets_every_extender_argument(mode):
    arguments = extender_arguments(CONFS[mode])
    assert set(arguments) == EXTENDER_ARGUMENTS - UNREGISTERED
    assert re.fullmatch(r"(\d+(\.\d+)?(ns|us|ms|s|m|h))+", arguments["extender.httpTimeout"])
    assert isinstance(arguments["extender.ignorable"], bool)
    assert isinstance(arguments["extender.managedResources"], list), "a string makes Volcano exit"


@pytest.mark.parametrize("mode", CONFS)
def test_scheduler_verbs_are_the_service_default_paths(mode):
    arguments = extender_arguments(CONFS[mode])
    verbs = {kind: arguments[f"extender.{kind}Verb"] for kind in VERB_KINDS
             if f"extender.{kind}Verb" not in UNREGISTERED}
    service = Config().verb_paths()
    assert {f"/{path}": kind for kind, path in verbs.items()} == \
        {path: kind for path, kind in service.items() if f"extender.{kind}Verb" not in UNREGISTERED}
    assert urlsplit(arguments["extender.urlPrefix"]).path in ("", "/")  # no path_prefix needed


@pytest.mark.parametrize("mode", CONFS)
def test_scheduler_conf_keeps_volcanos_default_plugins(mode):
    conf = yaml.safe_load(CONFS[mode].read_text())
    names = [p["name"] for tier in conf["tiers"] for p in tier["plugins"]]
    for plugin in ("priority", "gang", "conformance", "drf", "predicates", "proportion", "nodeorder"):
        assert plugin in names
    actions = [a.strip() for a in conf["actions"].split(",")]
    assert {"enqueue", "allocate", "preempt", "reclaim"} <= set(actions)


@pytest.mark.parametrize("kustomization", ["sidecar", "standalone"])
def test_scheduler_configmap_holds_the_conf_under_volcanos_key(kustomization):
    k = yaml.safe_load((K8S / kustomization / "kustomization.yaml").read_text())
    (generator,) = k["configMapGenerator"]
    assert generator["name"] == "volcano-scheduler-configmap"
    assert generator["files"] == ["volcano-scheduler.conf"]
    assert k["generatorOptions"]["disableNameSuffixHash"] is True


# ---------------------------------------------------------------------------------------------
# the pods


def pod_and_container(mode: str) -> tuple[dict, dict]:
    path = (K8S / "sidecar" / "volcano-scheduler-patch.yaml" if mode == "sidecar"
            else K8S / "standalone" / "deployment.yaml")
    pod = one(path, "Deployment")["spec"]["template"]["spec"]
    return pod, container(pod)


@pytest.mark.parametrize("mode", ["sidecar", "standalone"])
def test_probes_ask_real_routes_on_the_ops_port(mode):
    """The probes ask the ops port (``ops_bind``): the verb port answers the verbs alone."""
    pod, c = pod_and_container(mode)
    routes = service_routes()
    bind_host, bind_port = env(c)["POLICY_EXTENDER_OPS_BIND"].rsplit(":", 1)
    assert bind_port != env(c)["POLICY_EXTENDER_BIND"].rsplit(":", 1)[1]
    paths = {}
    for kind in ("livenessProbe", "readinessProbe"):
        host, port, path = probe_url(c[kind], c)
        assert path in routes, f"{mode} {kind} asks {path}, not a route of the service"
        assert port == int(bind_port)
        assert host in ("pod-ip", bind_host) and not (host == "pod-ip" and bind_host == "127.0.0.1"), \
            "the kubelet's httpGet goes to the pod IP, which a loopback-bound server does not answer"
        paths[kind] = path
    assert paths == {"livenessProbe": "/healthz", "readinessProbe": "/readyz"}


@pytest.mark.parametrize("mode", ["sidecar", "standalone"])
def test_resources_and_hardening(mode):
    pod, c = pod_and_container(mode)
    assert {"cpu", "memory"} <= set(c["resources"]["requests"])
    assert {"cpu", "memory"} <= set(c["resources"]["limits"])
    security = {**pod.get("securityContext", {}), **c["securityContext"]}
    assert security["runAsNonRoot"] is True and security["runAsUser"] != 0
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    writable = {m["mountPath"] for m in c["volumeMounts"] if not m.get("readOnly")}
    assert "/tmp" in writable  # gunicorn's heartbeat files, the metrics directory
    assert env(c)["PROMETHEUS_MULTIPROC_DIR"].startswith("/tmp/")


def test_sidecar_url_is_its_bind_address():
    _, c = pod_and_container("sidecar")
    url = urlsplit(extender_arguments(CONFS["sidecar"])["extender.urlPrefix"])
    assert f"{url.hostname}:{url.port}" == env(c)["POLICY_EXTENDER_BIND"] == "127.0.0.1:8713"


def test_standalone_url_reaches_the_service_and_the_bind_accepts_it():
    _, c = pod_and_container("standalone")
    service = one(K8S / "standalone" / "service.yaml", "Service")
    url = urlsplit(extender_arguments(CONFS["standalone"])["extender.urlPrefix"])
    assert url.hostname == f"{service['metadata']['name']}.volcano-system.svc"
    ports = {p["name"]: p for p in service["spec"]["ports"]}
    assert set(ports) == {"http", "ops"}
    assert url.port == ports["http"]["port"]
    container_ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert env(c)["POLICY_EXTENDER_BIND"] == f"0.0.0.0:{container_ports[ports['http']['targetPort']]}"
    assert env(c)["POLICY_EXTENDER_OPS_BIND"] == f"0.0.0.0:{container_ports[ports['ops']['targetPort']]}"
    assert env(c)["POLICY_EXTENDER_SESSION_STORE"]["secretKeyRef"]["name"] == "policy-extender-redis"


def test_standalone_selectors_match_the_pods():
    deployment = one(K8S / "standalone" / "deployment.yaml", "Deployment")
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    selectors = [deployment["spec"]["selector"]["matchLabels"],
                 one(K8S / "standalone" / "service.yaml", "Service")["spec"]["selector"],
                 one(K8S / "standalone" / "networkpolicy.yaml", "NetworkPolicy")["spec"]["podSelector"]["matchLabels"],
                 one(K8S / "standalone" / "poddisruptionbudget.yaml", "PodDisruptionBudget")["spec"]["selector"]["matchLabels"]]
    for selector in selectors:
        assert selector.items() <= pod_labels.items()


def test_network_policy_admits_only_the_scheduler_pods_on_the_extender_port():
    policy = one(K8S / "standalone" / "networkpolicy.yaml", "NetworkPolicy")["spec"]
    scheduler_labels = one(DATA / "volcano-scheduler-deployment.yaml", "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert policy["policyTypes"] == ["Ingress"]
    (rule,) = policy["ingress"]
    (peer,) = rule["from"]
    assert peer["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": "volcano-system"}
    assert peer["podSelector"]["matchLabels"].items() <= scheduler_labels.items()
    assert rule["ports"] == [{"protocol": "TCP", "port": 8713}]


def test_no_network_policy_admits_anyone_but_the_scheduler_to_the_verb_port():
    """Policies add up: the verb port appears in the standalone policy alone; every other policy
    of the pods admits only the ops port."""
    deployment = one(K8S / "standalone" / "deployment.yaml", "Deployment")
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    ops_port = int(env(container(deployment["spec"]["template"]["spec"]))["POLICY_EXTENDER_OPS_BIND"].rsplit(":", 1)[1])
    found = 0
    for path in MANIFESTS:
        for doc in load(path):
            if doc.get("kind") != "NetworkPolicy" or path == K8S / "standalone" / "networkpolicy.yaml":
                continue
            if not doc["spec"]["podSelector"].get("matchLabels", {}).items() <= pod_labels.items():
                continue
            found += 1
            for rule in doc["spec"]["ingress"]:
                assert rule.get("ports"), f"{path}: a rule without ports admits every port"
                assert {p["port"] for p in rule["ports"]} == {ops_port}, path
    assert found >= 1  # the monitoring policy


@pytest.mark.parametrize("mode", ["sidecar", "standalone"])
def test_the_pods_environment_is_a_configuration_the_service_accepts(mode):
    from policy_extender.config import load as load_config
    _, c = pod_and_container(mode)
    values = {name: value for name, value in env(c).items() if isinstance(value, str)}
    config = load_config({}, values)
    assert config.ops_bind and config.ops_bind != config.bind
    assert config.body_memory >= 256 << 20  # an onSessionOpen of 500 x 30 fits


@needs_kubectl
@pytest.mark.slow
def test_sidecar_patch_merges_into_volcanos_scheduler_deployment():
    merged = subprocess.run(
        [KUBECTL, "patch", "--local", "-o", "json", "-f", str(DATA / "volcano-scheduler-deployment.yaml"),
         "--patch-file", str(K8S / "sidecar" / "volcano-scheduler-patch.yaml")],
        capture_output=True, text=True, timeout=60)
    assert merged.returncode == 0, merged.stderr
    pod = json.loads(merged.stdout)["spec"]["template"]["spec"]
    assert [c["name"] for c in pod["containers"]] == ["policy-extender", "volcano-scheduler"]
    assert container(pod, "volcano-scheduler")["args"]  # the scheduler is left as it was
    volumes = {v["name"] for v in pod["volumes"]}
    assert {"scheduler-config", "klog-sock", "policy-extender-policies"} <= volumes


def test_sidecar_patch_names_do_not_collide_with_the_scheduler_pod():
    scheduler = one(DATA / "volcano-scheduler-deployment.yaml", "Deployment")
    patch = one(K8S / "sidecar" / "volcano-scheduler-patch.yaml", "Deployment")
    assert (patch["metadata"]["name"], patch["metadata"]["namespace"]) == ("volcano-scheduler", "volcano-system")
    theirs, ours = scheduler["spec"]["template"]["spec"], patch["spec"]["template"]["spec"]
    assert not {c["name"] for c in theirs["containers"]} & {c["name"] for c in ours["containers"]}
    assert not {v["name"] for v in theirs["volumes"]} & {v["name"] for v in ours["volumes"]}


# ---------------------------------------------------------------------------------------------
# gunicorn


def test_gunicorn_config_loads_and_wires_the_metrics_hooks():
    from policy_extender import gunicorn_conf, metrics
    from gunicorn.util import load_class
    from gunicorn.workers.gthread import ThreadWorker
    settings = gunicorn_conf.settings(Config())
    # gthread's worker, receiving each request on its event loop first (web/worker.py)
    assert issubclass(load_class(settings["worker_class"]), ThreadWorker)
    for hook in ("on_starting", "child_exit"):
        assert callable(settings[hook])
    assert settings["on_starting"].__module__ == gunicorn_conf.__name__
    assert hasattr(metrics, "on_starting") and hasattr(metrics, "child_exit")
