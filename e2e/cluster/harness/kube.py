"""A small client of the real API server: JSON over HTTPS with the admin's client certificate
(the harness's own reads, writes and watches), and kubectl for what users run (apply -k, patch,
cordon). Nothing here decides anything: it is how the checks see the cluster."""

from __future__ import annotations

import json
import ssl
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any


class ApiError(Exception):
    def __init__(self, status: int, body: str):
        super().__init__(f"{status}: {body[:500]}")
        self.status = status
        self.body = body


class Kube:
    def __init__(self, server: str, pki: Path, kubeconfig: Path, kubectl: Path):
        self.server = server.rstrip("/")
        self.kubeconfig = kubeconfig
        self.kubectl_bin = kubectl
        self.ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        self.ctx.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))

    def request(self, method: str, path: str, body: Any = None, *, content_type: str = "application/json",
                timeout: float = 30) -> Any:
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        req = urllib.request.Request(self.server + path, data=data, method=method,
                                     headers={"Content-Type": content_type, "Accept": "application/json"})
        try:
            with urllib.request.urlopen(req, context=self.ctx, timeout=timeout) as resp:
                raw = resp.read()
                if not resp.headers.get("Content-Type", "").startswith("application/json"):
                    return raw.decode(errors="replace")
        except urllib.error.HTTPError as e:
            raise ApiError(e.code, e.read().decode(errors="replace")) from None
        return json.loads(raw) if raw else None

    def get(self, path: str) -> Any:
        return self.request("GET", path)

    def create(self, path: str, obj: dict) -> Any:
        return self.request("POST", path, obj)

    def patch(self, path: str, patch: dict, kind: str = "merge") -> Any:
        return self.request("PATCH", path, patch, content_type=f"application/{kind}-patch+json")

    def delete(self, path: str) -> Any:
        return self.request("DELETE", path)

    def watch(self, path: str, resource_version: str, timeout: float = 3600) -> Iterator[dict]:
        """The API server's watch stream of path from resource_version: one event dict per line,
        until the server ends it (it does, after a while: call again from the last version)."""
        sep = "&" if "?" in path else "?"
        url = (f"{self.server}{path}{sep}watch=1&allowWatchBookmarks=true&resourceVersion="
               f"{urllib.parse.quote(resource_version)}&timeoutSeconds={int(timeout)}")
        req = urllib.request.Request(url, headers={"Accept": "application/json"})
        with urllib.request.urlopen(req, context=self.ctx, timeout=timeout + 30) as resp:
            for line in resp:
                if line.strip():
                    yield json.loads(line)

    def kubectl(self, *args: str, input: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
        proc = subprocess.run([str(self.kubectl_bin), "--kubeconfig", str(self.kubeconfig), *args],
                              input=input, capture_output=True, text=True, timeout=120)
        if check and proc.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)}: exit {proc.returncode}: {proc.stderr.strip()}")
        return proc
