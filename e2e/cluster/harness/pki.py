"""The cluster's certificates, made with openssl: one CA, the API server's serving certificate,
client certificates (the admin of the harness, kube-controller-manager, KWOK) and the service
account signing key. Everything is on loopback: the serving certificate names 127.0.0.1,
localhost and the in-cluster names of the kubernetes Service."""

from __future__ import annotations

import subprocess
from pathlib import Path


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make(pki: Path) -> Path:
    """Writes ca.crt/ca.key, apiserver.crt/.key, admin.crt/.key (system:masters), sa.key/sa.pub
    into pki (once: a second call keeps what is there) and returns pki."""
    pki.mkdir(parents=True, exist_ok=True)
    if (pki / ".complete").exists():
        return pki
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
             "-days", "30", "-subj", "/CN=policy-extender-e2e-ca", cwd=pki)
    (pki / "apiserver.ext").write_text(
        "subjectAltName=IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,"
        "DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local\n"
        "extendedKeyUsage=serverAuth\n")
    _sign(pki, "apiserver", "/CN=kube-apiserver", "apiserver.ext")
    (pki / "client.ext").write_text("extendedKeyUsage=clientAuth\n")
    _sign(pki, "admin", "/O=system:masters/CN=e2e-admin", "client.ext")
    _openssl("genrsa", "-out", "sa.key", "2048", cwd=pki)
    _openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=pki)
    (pki / ".complete").touch()
    return pki


def _sign(pki: Path, name: str, subject: str, ext: str) -> None:
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
             "-subj", subject, cwd=pki)
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", f"{name}.crt", "-days", "30", "-extfile", ext, cwd=pki)
