"""docker/k8s/redis-sentinel: Redis behind Sentinel for the standalone mode, checked without a cluster.

The objects select each other and the extender's pods, the Secret's address names the pods'
sentinels and the master the scripts monitor, nothing is persisted; and the pods' own start
scripts (the ConfigMap), run here with the local redis-server and redis-sentinel on loopback as
three "pods", start a master, two replicas and three sentinels that require the password, fail
over when the master is SIGKILLed, and bring the restarted old master back as a replica, not as
an empty master. The session store works through the Secret's address form before and after.
"""

from __future__ import annotations


import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
import redis

from policy_extender.session.factory import open_store
from policy_extender.session.store import SessionLost, StoreUnavailable
from policy_extender.store_url import parse_sentinel_url
from tests.ops.test_image import free_port
from tests.ops.test_manifests import K8S, env, one

HERE = K8S / "redis-sentinel"
NAMESPACE = "volcano-system"


def statefulset() -> dict:
    return one(HERE / "statefulset.yaml", "StatefulSet")


def pod_spec() -> dict:
    return statefulset()["spec"]["template"]["spec"]


def containers() -> dict[str, dict]:
    return {c["name"]: c for c in pod_spec()["containers"]}


def in_namespace(value: str) -> str:
    return value.replace("$(POD_NAMESPACE)", NAMESPACE)


def test_three_pods_each_a_redis_and_a_sentinel_named_by_the_headless_service():
    spec = statefulset()["spec"]
    assert spec["replicas"] == 3 and spec["podManagementPolicy"] == "OrderedReady"
    labels = spec["template"]["metadata"]["labels"]
    assert spec["selector"]["matchLabels"].items() <= labels.items()
    service = one(HERE / "service.yaml", "Service")
    assert spec["serviceName"] == service["metadata"]["name"]
    assert service["spec"]["clusterIP"] == "None" and service["spec"]["publishNotReadyAddresses"] is True
    assert service["spec"]["selector"].items() <= labels.items()
    ports = {p["name"]: p["port"] for p in service["spec"]["ports"]}
    assert ports == {"redis": 6379, "sentinel": 26379}
    assert {c["ports"][0]["name"]: c["ports"][0]["containerPort"] for c in containers().values()} == ports
    budget = one(HERE / "poddisruptionbudget.yaml", "PodDisruptionBudget")["spec"]
    assert budget["maxUnavailable"] == 1 and budget["selector"]["matchLabels"].items() <= labels.items()


def test_networkpolicy_admits_the_extender_and_the_redis_pods_only():
    policy = one(HERE / "networkpolicy.yaml", "NetworkPolicy")["spec"]
    labels = statefulset()["spec"]["template"]["metadata"]["labels"]
    extender = one(K8S / "standalone" / "deployment.yaml", "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert policy["podSelector"]["matchLabels"].items() <= labels.items()
    (rule,) = policy["ingress"]
    assert all(set(peer) == {"podSelector"} for peer in rule["from"])  # this namespace only
    selectors = [peer["podSelector"]["matchLabels"] for peer in rule["from"]]
    assert any(s.items() <= extender.items() for s in selectors)
    assert any(s.items() <= labels.items() for s in selectors)
    assert sorted(p["port"] for p in rule["ports"]) == [6379, 26379]


def test_the_secret_address_names_the_pods_sentinels_and_the_monitored_master():
    example = one(HERE / "secret.example.yaml", "Secret")
    extender_ref = env(one(K8S / "standalone" / "deployment.yaml", "Deployment")["spec"]["template"]["spec"]
                       ["containers"][0])["POLICY_EXTENDER_SESSION_STORE"]["secretKeyRef"]
    assert example["metadata"]["name"] == extender_ref["name"]
    address = parse_sentinel_url(example["stringData"][extender_ref["key"]])
    password = example["stringData"]["password"]
    assert address.password == address.sentinel_password == password
    for c in containers().values():
        variables = env(c)
        assert variables["REDIS_PASSWORD"]["secretKeyRef"] == {"name": extender_ref["name"], "key": "password"}
        sentinels = in_namespace(variables["SENTINELS"]).split()
        assert [f"{host}:{port}" for host, port in address.sentinels] == sentinels
        assert address.master == variables["MASTER_NAME"]
        headless = one(HERE / "service.yaml", "Service")["metadata"]["name"]
        assert sentinels == [f"redis-sentinel-{n}.{headless}.{NAMESPACE}.svc:26379" for n in range(3)]
    kustomization = (HERE / "kustomization.yaml").read_text()
    assert "secret.example.yaml" not in kustomization.split("resources:")[1]  # never applied


def test_nothing_is_persisted_and_the_containers_are_hardened():
    spec = pod_spec()
    assert all("persistentVolumeClaim" not in v for v in spec["volumes"])
    assert "volumeClaimTemplates" not in statefulset()["spec"]
    script = one(HERE / "configmap.yaml", "ConfigMap")["data"]["start-redis.sh"]
    assert "save \"\"" in script and "appendonly no" in script and "maxmemory-policy noeviction" in script
    for c in containers().values():
        security = {**spec["securityContext"], **c["securityContext"]}
        assert security["runAsNonRoot"] is True and security["runAsUser"] != 0
        assert security["readOnlyRootFilesystem"] is True and security["allowPrivilegeEscalation"] is False
        assert {"cpu", "memory"} <= set(c["resources"]["requests"]) and {"cpu", "memory"} <= set(c["resources"]["limits"])
        assert "REDIS_PASSWORD" not in " ".join(c["command"])  # not on a command line


def test_the_data_directory_holds_a_full_sync_under_maxmemory():
    """A replica's full sync writes the whole RDB into the working directory beside the previous
    one before it renames it: the emptyDir must hold twice maxmemory, on disk (a Memory medium
    would count against the container's memory limit)."""
    script = one(HERE / "configmap.yaml", "ConfigMap")["data"]["start-redis.sh"]
    (maxmemory,) = re.findall(r"maxmemory (\d+)mb", script)
    (data,) = [v for v in pod_spec()["volumes"] if v["name"] == "data"]
    mount = {m["name"]: m["mountPath"] for m in containers()["redis"]["volumeMounts"]}
    assert mount["data"] == "/data"  # the redis image's working directory, where the RDB goes
    assert data["emptyDir"].get("medium") != "Memory"
    size = data["emptyDir"]["sizeLimit"]
    assert size.endswith("Mi") and int(size[:-2]) << 20 >= 2 * int(maxmemory) * 1000 * 1000, size


# -- the pods' own scripts, on loopback --------------------------------------------------------


class Pod:
    """One pod of the StatefulSet on loopback: its Redis and its sentinel, started by the
    ConfigMap's scripts with the manifest's environment, ports and names made local."""

    def __init__(self, n: int, scripts: Path, state: Path, ports: list[tuple[int, int]],
                 password: str) -> None:
        self.n, self.scripts = n, scripts
        self.redis_port, self.sentinel_port = ports[n]
        self.processes: dict[str, subprocess.Popen] = {}
        self.env = {}
        for name, c in containers().items():
            variables = {k: v for k, v in env(c).items() if isinstance(v, str)}
            variables.update(
                ANNOUNCE_HOST="127.0.0.1", FIRST_MASTER_HOST="127.0.0.1", FIRST_MASTER_PORT=str(ports[0][0]),
                SENTINELS=" ".join(f"127.0.0.1:{s}" for _, s in ports), REDIS_PORT=str(self.redis_port),
                SENTINEL_PORT=str(self.sentinel_port), DOWN_AFTER_MS="500", FAILOVER_TIMEOUT_MS="2000",
                CONF_DIR=str(state / f"pod-{n}" / name), REDIS_PASSWORD=password, REDISCLI_AUTH=password,
                POD_NAME=f"redis-sentinel-{n}", POD_NAMESPACE=NAMESPACE)
            assert set(variables) >= set(env(c))  # every variable the manifest gives is given here
            self.env[name] = {**os.environ, **variables}
        self.state = state

    def start(self, name: str) -> None:
        command = [part.replace("/scripts/", f"{self.scripts}/") for part in containers()[name]["command"]]
        log = open(self.state / f"pod-{self.n}-{name}.log", "ab")
        # each pod its own working directory (Redis's `dir`), as each pod has its own file system:
        # shared, a restarted master would load the dump.rdb a replica wrote at its full sync
        workdir = self.state / f"pod-{self.n}" / "workdir"
        workdir.mkdir(parents=True, exist_ok=True)
        self.processes[name] = subprocess.Popen(command, env=self.env[name], stdout=log, stderr=subprocess.STDOUT,
                                                cwd=workdir)
        log.close()

    def kill(self, name: str) -> None:
        self.processes[name].send_signal(signal.SIGKILL)
        self.processes[name].wait()

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.terminate()
                process.wait(10)


def wait(condition, what: str, timeout: float = 40.0):
    deadline = time.monotonic() + timeout
    while True:
        try:
            found = condition()
            if found:
                return found
        except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError, StoreUnavailable):
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} after {timeout}s")
        time.sleep(0.1)


@pytest.fixture
def pods(tmp_path):
    for binary in ("redis-server", "redis-sentinel", "redis-cli", "timeout"):
        if shutil.which(binary) is None:
            pytest.fail(f"{binary} is not installed (apt-get install -y redis-server redis-sentinel; "
                        "scripts/test does)")
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    for name, text in one(HERE / "configmap.yaml", "ConfigMap")["data"].items():
        (scripts / name).write_text(text)
    password = "s3cret-for-the-test"
    ports = [(free_port(), free_port()) for _ in range(3)]
    started = [Pod(n, scripts, tmp_path, ports, password) for n in range(3)]
    try:
        for pod in started:  # OrderedReady: each pod is ready before the next starts
            pod.start("redis")
            pod.start("sentinel")
            wait(lambda: client(pod.redis_port, password).ping() and client(pod.sentinel_port, password).ping(),
                 f"pod {pod.n} ready")
        yield started, password
    finally:
        for pod in started:
            pod.stop()


def client(port: int, password: str | None) -> redis.Redis:
    return redis.Redis(host="127.0.0.1", port=port, password=password, socket_timeout=2)


def role(port: int, password: str) -> str:
    return client(port, password).info("replication")["role"]


def master_port(pods: list[Pod], password: str) -> int:
    return int(client(pods[1].sentinel_port, password).sentinel_get_master_addr_by_name("mymaster")[1])  # type: ignore[index]  # (host, port)


@pytest.mark.slow
def test_the_pods_scripts_start_a_sentinel_set_that_fails_over_and_takes_the_old_master_back(pods):
    pods, password = pods
    first = pods[0]
    assert role(first.redis_port, password) == "master"
    assert [role(p.redis_port, password) for p in pods[1:]] == ["slave", "slave"]
    wait(lambda: all(client(p.sentinel_port, password).sentinel_master("mymaster")["num-slaves"] == 2
                     and client(p.sentinel_port, password).sentinel_master("mymaster")["num-other-sentinels"] == 2
                     for p in pods), "the sentinels know each other and both replicas")
    with pytest.raises(redis.AuthenticationError):
        client(first.redis_port, None).ping()
    with pytest.raises(redis.AuthenticationError):
        client(first.sentinel_port, None).ping()

    # the extender's store, through the Secret's address form made local
    hosts = ",".join(f"127.0.0.1:{p.sentinel_port}" for p in pods)
    url = f"redis+sentinel://:{password}@{hosts}/mymaster/0?sentinel_password={password}"
    store = open_store(url)
    store.open(b"snapshot", "v1", {"a.policy": "filter ok: true"})
    assert store.head().policy_version == "v1"
    # replication is asynchronous: killed right after the open, the master may take the session
    # with it, and the promoted replica then holds no head to find stale (head() is None, which
    # SessionCache reports as a vanished session, not this test's case). Both replicas have it first.
    assert client(first.redis_port, password).wait(2, 10_000) == 2

    # the master's pod dies and is restarted at once, before the sentinels saw it down: its
    # script waits for the failover and joins the new master as a replica (not an empty master)
    first.kill("redis")
    first.start("redis")
    wait(lambda: master_port(pods, password) != first.redis_port, "a failover")

    def following_the_master() -> bool:
        """The old master is in sync with the master the sentinels name now. (On a loaded machine a
        failover attempt can pass its 2 s failover-timeout and the next one promote the other
        replica; the old master may have joined the first one meanwhile, and the sentinels then
        move it to the one they promoted: wait for that, not for the first link.)"""
        replication = client(first.redis_port, password).info("replication")
        return (replication.get("master_link_status") == "up"
                and replication.get("master_port") == master_port(pods, password))
    try:
        wait(following_the_master, "the old master back as a replica")
    except TimeoutError as error:  # say what the pods did (their logs go with tmp_path)
        logs = "\n".join(f"--- {log.name}\n" + log.read_text(errors="replace")[-3000:]
                         for log in sorted(first.state.glob("pod-*.log")))
        raise TimeoutError(f"{error}; the old master's replication: "
                           f"{client(first.redis_port, password).info('replication')}\n{logs}") from None
    assert "waiting for them to promote a replica" in (first.state / "pod-0-redis.log").read_text()

    def lost() -> bool:
        try:
            store.head()
        except SessionLost:
            return True
        return False
    wait(lost, "the session opened before the failover reported lost")
    wait(lambda: store.open(b"snapshot", "v2", {"a.policy": "filter ok: true"}), "an open on the new master")
    assert store.head().policy_version == "v2"
