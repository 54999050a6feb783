"""docker/k8s/redis: the standalone mode's Redis, checked without a cluster.

The objects select each other and the extender's pods, the Secret feeds both sides, nothing is
persisted; and the container's own command, run here with the local redis-server on loopback,
starts a Redis that refuses clients without the password and saves nothing. (``kubectl
kustomize`` renders it in tests/ops/test_manifests.py, with every kustomization.)
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import time
from urllib.parse import urlsplit

import pytest
import redis

from tests.ops.test_image import free_port
from tests.ops.test_manifests import K8S, env, one

REDIS = K8S / "redis"


def deployment() -> dict:
    return one(REDIS / "deployment.yaml", "Deployment")


def pod_spec() -> dict:
    return deployment()["spec"]["template"]["spec"]


def redis_container() -> dict:
    (c,) = pod_spec()["containers"]
    return c


def test_a_single_redis_recreated_not_rolled():
    spec = deployment()["spec"]
    assert spec["replicas"] == 1
    assert spec["strategy"]["type"] == "Recreate"


def test_service_and_networkpolicy_select_the_redis_pod():
    labels = deployment()["spec"]["template"]["metadata"]["labels"]
    assert deployment()["spec"]["selector"]["matchLabels"].items() <= labels.items()
    service = one(REDIS / "service.yaml", "Service")
    assert service["spec"]["selector"].items() <= labels.items()
    policy = one(REDIS / "networkpolicy.yaml", "NetworkPolicy")["spec"]
    assert policy["podSelector"]["matchLabels"].items() <= labels.items()
    (port,) = service["spec"]["ports"]
    ports = {p["name"]: p["containerPort"] for p in redis_container()["ports"]}
    assert ports[port["targetPort"]] == port["port"] == 6379


def test_networkpolicy_admits_only_the_extender_pods_of_this_namespace():
    policy = one(REDIS / "networkpolicy.yaml", "NetworkPolicy")["spec"]
    extender = one(K8S / "standalone" / "deployment.yaml", "Deployment")["spec"]["template"]["metadata"]["labels"]
    scheduler = one(K8S.parent.parent / "tests/ops/data/volcano-scheduler-deployment.yaml",
                    "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert policy["policyTypes"] == ["Ingress"]
    (rule,) = policy["ingress"]
    (peer,) = rule["from"]
    assert set(peer) == {"podSelector"}  # no namespaceSelector: this namespace only
    assert peer["podSelector"]["matchLabels"].items() <= extender.items()
    assert not peer["podSelector"]["matchLabels"].items() <= scheduler.items()
    assert rule["ports"] == [{"protocol": "TCP", "port": 6379}]


def test_the_secret_feeds_redis_and_the_extender_the_same_password_and_address():
    c = redis_container()
    refs = {name: ref["secretKeyRef"] for name, ref in env(c).items()}
    extender_ref = env(one(K8S / "standalone" / "deployment.yaml", "Deployment")["spec"]["template"]["spec"]
                       ["containers"][0])["POLICY_EXTENDER_SESSION_STORE"]["secretKeyRef"]
    assert refs["REDIS_PASSWORD"] == refs["REDISCLI_AUTH"] == {"name": extender_ref["name"], "key": "password"}
    example = one(REDIS / "secret.example.yaml", "Secret")
    assert example["metadata"]["name"] == extender_ref["name"]
    url = urlsplit(example["stringData"][extender_ref["key"]])
    service = one(REDIS / "service.yaml", "Service")
    assert url.scheme == "redis" and url.password == example["stringData"]["password"]
    assert (url.hostname, url.port) == (f"{service['metadata']['name']}.volcano-system.svc", 6379)
    kustomization = (REDIS / "kustomization.yaml").read_text()
    assert "secret.example.yaml" not in kustomization.split("resources:")[1]  # never applied


def test_nothing_is_persisted_and_the_container_is_hardened():
    spec, c = pod_spec(), redis_container()
    assert all("persistentVolumeClaim" not in v for v in spec["volumes"])
    args = c["args"]
    assert args[args.index("--save") + 1] == "" and args[args.index("--appendonly") + 1] == "no"
    security = {**spec["securityContext"], **c["securityContext"]}
    assert security["runAsNonRoot"] is True and security["runAsUser"] != 0
    assert security["readOnlyRootFilesystem"] is True and security["allowPrivilegeEscalation"] is False
    assert {"cpu", "memory"} <= set(c["resources"]["requests"]) and {"cpu", "memory"} <= set(c["resources"]["limits"])
    writable = {m["mountPath"] for m in c["volumeMounts"]}
    conf = [v for v in spec["volumes"] if v["name"] == "conf"][0]
    assert {"/conf", "/data"} <= writable and conf["emptyDir"]["medium"] == "Memory"
    assert "REDIS_PASSWORD" not in " ".join(args)  # not on the command line


@pytest.fixture
def manifest_redis(tmp_path):
    """The container's command and args, run with the local redis-server: /conf is a temporary
    directory, and --port/--bind put it on a free loopback port."""
    if shutil.which("redis-server") is None:
        pytest.fail("redis-server is not installed (apt-get install -y redis-server; scripts/test does)")
    c = redis_container()
    port = free_port()
    command = [part.replace("/conf/", f"{tmp_path}/") for part in c["command"]]
    args = [*c["args"], "--port", str(port), "--bind", "127.0.0.1", "--dir", str(tmp_path)]
    password = "s3cret-for-the-test"
    process = subprocess.Popen(command + args, env={**os.environ, "REDIS_PASSWORD": password},
                               cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    client = redis.Redis(host="127.0.0.1", port=port, password=password, socket_timeout=5)
    try:
        deadline = time.monotonic() + 20
        while True:
            assert process.poll() is None, process.stdout.read().decode()
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield port, password, client, tmp_path
    finally:
        client.close()
        process.terminate()
        process.wait(20)


@pytest.mark.slow
def test_the_manifest_command_starts_a_redis_that_needs_the_password_and_saves_nothing(manifest_redis):
    port, password, client, directory = manifest_redis
    with pytest.raises(redis.AuthenticationError):
        redis.Redis(host="127.0.0.1", port=port, socket_timeout=5).ping()
    with pytest.raises(redis.AuthenticationError):
        redis.Redis(host="127.0.0.1", port=port, password="wrong", socket_timeout=5).ping()
    assert client.config_get("save") == {"save": ""}
    assert client.config_get("appendonly") == {"appendonly": "no"}
    assert client.config_get("maxmemory-policy") == {"maxmemory-policy": "noeviction"}
    conf = directory / "redis.conf"
    assert stat.S_IMODE(conf.stat().st_mode) == 0o600
    assert password in conf.read_text()


@pytest.mark.slow
def test_the_session_store_works_through_the_secret_url(manifest_redis):
    port, password, _, _ = manifest_redis
    from policy_extender.session.factory import open_store
    example = one(REDIS / "secret.example.yaml", "Secret")["stringData"]
    url = urlsplit(example["url"])
    local = url._replace(netloc=f":{password}@127.0.0.1:{port}").geturl()
    store = open_store(local)
    assert store.head() is None
    store.open(b"snapshot", "v1", {"a.policy": "filter ok: true"})  # a session round trip
    assert store.head().policy_version == "v1" and store.snapshot(store.head().session_id) == b"snapshot"
    store.close()
    assert store.head() is None
    wrong = open_store(url._replace(netloc=f":not-{password}@127.0.0.1:{port}").geturl())
    with pytest.raises(redis.AuthenticationError):
        wrong.head()
