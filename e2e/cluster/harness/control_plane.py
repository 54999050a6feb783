"""One real cluster on loopback, as a user deploys policy-extender on it.

Started, in order: etcd; kube-apiserver (client certificates, RBAC, service accounts);
kube-controller-manager; KWOK (the nodes' kubelets: heartbeats, pods that start and finish);
Volcano's installer manifests (CRDs, RBAC, ConfigMaps, Deployments) and vc-controller-manager as
its service account; then the product: `kubectl apply -k docker/k8s` and the sidecar patch, both
validated by the API server, and from the Deployment the API server then holds, the two containers
of the volcano-scheduler pod, run as processes: vc-scheduler with the installer's flags as its
service account, and `policy-extender serve` with the container's command, env and mounts. Their
configMap volumes are projected from the live ConfigMaps by the kubelet's own code (cmd/project).

Deviations from a cluster, each because there is no container runtime or no in-cluster network:
Volcano's admission webhooks are not registered (vc-webhook-manager does not run; jobs are written
as the webhook would leave them); the Deployments' pods stay Pending (no default scheduler), their
containers run here as processes instead; a mount path is a directory of the run."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from . import pki as pkimod
from .kube import Kube
from .procs import Proc, free_port, http_ok, wait_for

ROOT = Path(__file__).resolve().parents[3]
CLUSTER = ROOT / "e2e" / "cluster"
KWOK_STAGES = ("node/fast", "node/heartbeat-with-lease", "pod/general")


def volcano_manifests() -> Path:
    """Volcano v1.15.1's installer/volcano-development.yaml: beside the checkout, or from the
    volcano.sh/volcano module at that version."""
    shared = ROOT.parent / "shared" / "volcano-src" / "manifests-v1.15.1" / "installer" / "volcano-development.yaml"
    if shared.exists():
        return shared
    out = subprocess.run(["go", "mod", "download", "-json", "volcano.sh/volcano@v1.15.1"], cwd=CLUSTER,
                         capture_output=True, text=True, check=True).stdout
    return Path(json.loads(out)["Dir"]) / "installer" / "volcano-development.yaml"


def kwok_stage_files() -> list[Path]:
    """KWOK v0.8.0's own stages (its kustomize/stage folder in the module): nodes initialised and
    heartbeating with leases, pods created, started, completed (those a Job owns: Volcano's
    batch.volcano.sh Job is one) and deleted, each after the delays their annotations give."""
    out = subprocess.run(["go", "mod", "download", "-json", "sigs.k8s.io/kwok@v0.8.0"], cwd=CLUSTER,
                         capture_output=True, text=True, check=True).stdout
    base = Path(json.loads(out)["Dir"]) / "kustomize" / "stage"
    files = []
    for sub in KWOK_STAGES:
        kustomization = yaml.safe_load((base / sub / "kustomization.yaml").read_text())
        files += [base / sub / r for r in kustomization["resources"]]
    return files


class Cluster:
    def __init__(self, run: Path, bin_dir: Path, *, extender: str = "policy-extender",
                 policies: Path | None = None, values: Path | None = None, log=print):
        self.run, self.bin = run, bin_dir
        self.extender = extender      # policy-extender | none | constant
        self.policies = policies      # a policy directory (None: the shipped docker/k8s/policies)
        self.values = values
        self.log = log
        self.procs: dict[str, Proc] = {}
        self.ports: dict[str, int] = {}
        self._kube: Kube | None = None
        self.mounts: dict[str, dict[str, Path]] = {}   # container -> mountPath -> local dir

    @property
    def kube(self) -> Kube:
        """The API server's client, once kube-apiserver has started."""
        if self._kube is None:
            raise RuntimeError("the API server has not been started")
        return self._kube

    # -- the control plane ----------------------------------------------------------------------
    def up(self) -> None:
        t0 = time.monotonic()
        self.run.mkdir(parents=True, exist_ok=True)
        self.pki = pkimod.make(self.run / "pki")
        for name in ("etcd", "etcd-peer", "apiserver", "kcm", "vcc-healthz", "vcc-metrics", "vcs-healthz",
                     "vcs-metrics", "kwok"):
            self.ports[name] = free_port()
        self._etcd()
        self._apiserver()
        self._kcm()
        self._kwok()
        self._volcano()
        self._product()
        self.log(f"cluster up in {time.monotonic() - t0:.1f}s ({self.run})")

    def start(self, name: str, argv: list[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> Proc:
        proc = Proc(name, argv, self.run / "logs" / f"{name}.log", env=env, cwd=cwd).start()
        self.procs[name] = proc
        return proc

    def _etcd(self) -> None:
        e, p = self.ports["etcd"], self.ports["etcd-peer"]
        proc = self.start("etcd", [str(self.bin / "etcd"), "--name", "e2e", "--data-dir", str(self.run / "etcd"),
                                   "--listen-client-urls", f"http://127.0.0.1:{e}",
                                   "--advertise-client-urls", f"http://127.0.0.1:{e}",
                                   "--listen-peer-urls", f"http://127.0.0.1:{p}",
                                   "--initial-advertise-peer-urls", f"http://127.0.0.1:{p}",
                                   "--initial-cluster", f"e2e=http://127.0.0.1:{p}",
                                   # a throwaway cluster: fsync costs seconds per write on a busy disk
                                   "--unsafe-no-fsync", "--log-level", "warn"])
        wait_for("etcd", lambda: http_ok(f"http://127.0.0.1:{e}/health"), 60, proc)

    def _apiserver(self) -> None:
        k, port = self.pki, self.ports["apiserver"]
        proc = self.start("kube-apiserver", [
            str(self.bin / "kube-apiserver"), "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
            f"--secure-port={port}", f"--etcd-servers=http://127.0.0.1:{self.ports['etcd']}",
            f"--tls-cert-file={k / 'apiserver.crt'}", f"--tls-private-key-file={k / 'apiserver.key'}",
            f"--client-ca-file={k / 'ca.crt'}", "--authorization-mode=Node,RBAC",
            f"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={k / 'sa.pub'}", f"--service-account-signing-key-file={k / 'sa.key'}",
            "--service-cluster-ip-range=10.96.0.0/16", "--allow-privileged=true", "--profiling=false",
            "--enable-priority-and-fairness=false",
            # the kubernetes Service's endpoint would be 127.0.0.1, which Endpoints refuse
            "--endpoint-reconciler-type=none", "--v=1"])
        server = f"https://127.0.0.1:{port}"
        self.kubeconfig = self._kubeconfig("admin", {"client-certificate": str(k / "admin.crt"),
                                                     "client-key": str(k / "admin.key")})
        self._kube = Kube(server, k, self.kubeconfig, self.bin / "kubectl")
        kube = self.kube
        wait_for("kube-apiserver /readyz", lambda: kube.request("GET", "/readyz", timeout=3) == "ok", 90, proc)

    def _kubeconfig(self, user: str, auth: dict[str, str]) -> Path:
        path = self.run / f"{user}.kubeconfig"
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "e2e",
            "clusters": [{"name": "e2e", "cluster": {"server": f"https://127.0.0.1:{self.ports['apiserver']}",
                                                     "certificate-authority": str(self.pki / "ca.crt")}}],
            "users": [{"name": user, "user": auth}],
            "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": user}}]}))
        return path

    def _kcm(self) -> None:
        k = self.pki
        proc = self.start("kube-controller-manager", [
            str(self.bin / "kube-controller-manager"), f"--kubeconfig={self.kubeconfig}",
            f"--service-account-private-key-file={k / 'sa.key'}", f"--root-ca-file={k / 'ca.crt'}",
            "--use-service-account-credentials=false", "--leader-elect=false", "--bind-address=127.0.0.1",
            f"--secure-port={free_port()}", "--controllers=*,-nodeipam,-cloud-node-lifecycle",
            "--v=1"])
        kube = self.kube
        wait_for("the default service account", lambda: kube.get("/api/v1/namespaces/default/serviceaccounts/default"),
                 90, proc)

    def _kwok(self) -> None:
        config = self.run / "kwok.yaml"
        docs = []
        for f in kwok_stage_files():
            docs.append(yaml.safe_load(f.read_text()))
        config.write_text(yaml.safe_dump_all(docs))
        self.start("kwok", [str(self.bin / "kwok"), f"--kubeconfig={self.kubeconfig}", f"--config={config}",
                            "--manage-nodes-with-label-selector=type=kwok", "--cidr=10.0.0.0/16",
                            "--node-ip=10.0.0.1", "--node-lease-duration-seconds=40",
                            f"--server-address=127.0.0.1:{self.ports['kwok']}", "-v=INFO"])

    # -- Volcano ------------------------------------------------------------------------------------
    def _volcano(self) -> None:
        docs = [d for d in yaml.safe_load_all(volcano_manifests().read_text()) if d]
        kept = [d for d in docs if d["kind"] not in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")]
        self.kube.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(kept))
        self.kube.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd/jobs.batch.volcano.sh",
                          "crd/podgroups.scheduling.volcano.sh", "crd/queues.scheduling.volcano.sh")
        self.deployments = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Deployment"}
        dep = self.kube.get("/apis/apps/v1/namespaces/volcano-system/deployments/volcano-controllers")
        c = dep["spec"]["template"]["spec"]["containers"][0]
        argv = [str(self.bin / "controller-manager"), *c.get("args", []),
                f"--kubeconfig={self._sa_kubeconfig(dep)}",
                f"--healthz-address=127.0.0.1:{self.ports['vcc-healthz']}",
                f"--listen-address=127.0.0.1:{self.ports['vcc-metrics']}"]
        self.start("vc-controller-manager", argv)

    def _sa_kubeconfig(self, deployment: dict) -> Path:
        """A kubeconfig with a token of the Deployment's service account: the process has exactly
        the RBAC the installer gives its pod."""
        ns = deployment["metadata"]["namespace"]
        sa = deployment["spec"]["template"]["spec"].get("serviceAccountName") or "default"
        token = self.kube.create(f"/api/v1/namespaces/{ns}/serviceaccounts/{sa}/token",
                                 {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                  "spec": {"expirationSeconds": 86400}})["status"]["token"]
        return self._kubeconfig(f"{ns}-{sa}", {"token": token})

    # -- the product ----------------------------------------------------------------------------------
    def _product(self) -> None:
        k8s = ROOT / "docker" / "k8s"
        self.kube.kubectl("apply", "-k", str(k8s))
        if self.policies is not None:
            self.apply_policies(self.policies, self.values)
        self.kube.kubectl("-n", "volcano-system", "patch", "deployment", "volcano-scheduler",
                          "--patch-file", str(k8s / "sidecar" / "volcano-scheduler-patch.yaml"))
        dep = self.kube.get("/apis/apps/v1/namespaces/volcano-system/deployments/volcano-scheduler")
        (self.run / "volcano-scheduler.deployment.json").write_text(json.dumps(dep, indent=1))
        spec = dep["spec"]["template"]["spec"]
        containers = {c["name"]: c for c in spec["containers"]}
        volumes = {v["name"]: v for v in spec["volumes"]}
        self.scheduler_conf = self.kube.get("/api/v1/namespaces/volcano-system/configmaps/volcano-scheduler-configmap")
        if self.extender == "policy-extender":
            self._serve(containers["policy-extender"], volumes)
        else:
            self._other_extender()
        self._vc_scheduler(dep, containers["volcano-scheduler"], volumes)

    def apply_policies(self, policies: Path, values: Path | None = None, *, check: bool = True) -> subprocess.CompletedProcess:
        """What a user runs to change the policies: `policy-extender configmap DIR | kubectl apply -f -`."""
        cmd = [sys.executable, "-m", "policy_extender", "configmap", str(policies)]
        if values is not None:
            cmd += ["--values", str(values)]
        cm = subprocess.run(cmd, capture_output=True, text=True)
        if cm.returncode != 0:
            if check:
                raise RuntimeError(f"policy-extender configmap {policies}: {cm.stderr.strip()}")
            return cm
        return self.kube.kubectl("-n", "volcano-system", "apply", "-f", "-", input=cm.stdout, check=check)

    def _mounts(self, container: dict, volumes: dict[str, dict]) -> dict[str, Path]:
        """Each of the container's volumeMounts as a directory of the run; configMap volumes are
        projected from the live ConfigMap by cmd/project (the kubelet's AtomicWriter)."""
        mounts: dict[str, Path] = {}
        for m in container.get("volumeMounts", []):
            vol = volumes[m["name"]]
            local = self.run / "volumes" / container["name"] / m["name"]
            local.mkdir(parents=True, exist_ok=True)
            mounts[m["mountPath"]] = local
            if "configMap" in vol:
                name = vol["configMap"]["name"]
                proc = self.start(f"project-{m['name']}", [
                    str(self.bin / "project"), f"--kubeconfig={self.kubeconfig}", "--namespace=volcano-system",
                    f"--name={name}", f"--dir={local}"])
                wait_for(f"configMap {name} projected into {local}", lambda: (local / "..data").exists(), 30, proc)
        self.mounts[container["name"]] = mounts
        return mounts

    @staticmethod
    def _rewrite(value: str, mounts: dict[str, Path]) -> str:
        """A path under a mountPath moved to the mount's directory of the run: the whole value
        (an env value), or after a flag's '=' or a scheme's ':' (sqlite:/var/run/...)."""
        for mount, local in sorted(mounts.items(), key=lambda kv: -len(kv[0])):
            pattern = r"(^|[=:])" + re.escape(mount.rstrip("/")) + r"(?=/|$)"
            value, n = re.subn(pattern, lambda m: m.group(1) + str(local), value, count=1)
            if n:
                return value
        return value

    def _serve(self, container: dict, volumes: dict[str, dict]) -> None:
        mounts = self._mounts(container, volumes)
        image = dockerfile_image()
        env = {k: self._rewrite(v, mounts) for k, v in image["env"].items()}
        for e in container.get("env", []):
            env[e["name"]] = self._rewrite(e["value"], mounts)
        env["PATH"] = f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"
        argv = container.get("command") or image["entrypoint"]
        argv = [*argv, *(container.get("args") or ([] if container.get("command") else image["cmd"]))]
        argv = [self._rewrite(a, mounts) for a in argv]
        self.serve_argv, self.serve_env = argv, env
        workdir = self._rewrite(image["workdir"], mounts)
        self.serve_cwd = Path(workdir) if Path(workdir).is_dir() else self.run
        self.start_serve()

    @property
    def ops(self) -> str:
        """Where the service answers /readyz, /status, /metrics and /why: its ops port, else the verbs'."""
        return self.serve_env.get("POLICY_EXTENDER_OPS_BIND") or self.serve_env["POLICY_EXTENDER_BIND"]

    def start_serve(self) -> None:
        proc = self.start("policy-extender", self.serve_argv, env=self.serve_env, cwd=self.serve_cwd)
        wait_for("policy-extender /readyz", lambda: http_ok(f"http://{self.ops}/readyz"), 60, proc)

    def _other_extender(self) -> None:
        """The comparisons: no extender (the plugin removed from the conf) or one that answers the
        same every time (the outcome engine's Go `constant` extender: every verb's neutral answer after
        reading the body, e2e/volcano/handwritten.go), on the address the conf names."""
        conf = yaml.safe_load(self.scheduler_conf["data"]["volcano-scheduler.conf"])
        if self.extender == "none":
            for tier in conf["tiers"]:
                tier["plugins"] = [p for p in tier["plugins"] if p["name"] != "extender"]
            self.scheduler_conf["data"]["volcano-scheduler.conf"] = yaml.safe_dump(conf, sort_keys=False)
            self.kube.kubectl("-n", "volcano-system", "apply", "-f", "-",
                              input=yaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap",
                                                    "metadata": {"name": "volcano-scheduler-configmap",
                                                                 "namespace": "volcano-system"},
                                                    "data": self.scheduler_conf["data"]}))
            return
        url = next(p["arguments"]["extender.urlPrefix"] for t in conf["tiers"] for p in t["plugins"]
                   if p["name"] == "extender")
        bind = url.split("//", 1)[1]
        proc = self.start("constant-extender", [str(self.bin / "engine"), "-serve-extender", "constant", "-bind", bind])
        wait_for("the constant extender", lambda: http_ok(f"http://{bind}/readyz"), 30, proc)

    def _vc_scheduler(self, dep: dict, container: dict, volumes: dict[str, dict]) -> None:
        mounts = self._mounts(container, volumes)
        argv = [str(self.bin / "scheduler"), *[self._rewrite(a, mounts) for a in container.get("args", [])],
                f"--kubeconfig={self._sa_kubeconfig(dep)}",
                f"--healthz-address=127.0.0.1:{self.ports['vcs-healthz']}",
                f"--listen-address=127.0.0.1:{self.ports['vcs-metrics']}",
                f"--cache-dump-dir={self.run / 'volumes'}"]
        proc = self.start("vc-scheduler", argv)
        wait_for("vc-scheduler /healthz", lambda: http_ok(f"http://127.0.0.1:{self.ports['vcs-healthz']}/healthz"),
                 90, proc)

    def down(self) -> None:
        for name in reversed(list(self.procs)):
            self.procs[name].stop()


def dockerfile_image() -> dict[str, Any]:
    """ENTRYPOINT, CMD, ENV and WORKDIR of the final stage of docker/Dockerfile: the container's
    command when the manifest gives none."""
    text = (ROOT / "docker" / "Dockerfile").read_text()
    lines, buf = [], ""
    for raw in text.splitlines():
        if buf and raw.strip().startswith("#"):
            continue  # a comment inside a continued instruction: Docker drops it
        if raw.rstrip().endswith("\\"):
            buf += raw.rstrip()[:-1] + " "
            continue
        lines.append(buf + raw)
        buf = ""
    stage: list[str] = []
    for line in lines:
        if line.startswith("FROM "):
            stage = []
        stage.append(line)
    image: dict[str, Any] = {"entrypoint": [], "cmd": [], "env": {}, "workdir": "/"}
    for line in stage:
        word, _, rest = line.partition(" ")
        if word == "ENTRYPOINT":
            image["entrypoint"] = json.loads(rest)
        elif word == "CMD":
            image["cmd"] = json.loads(rest) if rest.strip().startswith("[") else shlex.split(rest)
        elif word == "ENV":
            for part in shlex.split(rest):
                if "=" in part:
                    key, _, val = part.partition("=")
                    image["env"][key] = val
        elif word == "WORKDIR":
            image["workdir"] = rest.strip()
    return image
