"""HTTPS through gunicorn's certificate options: a real server, a self-signed certificate."""

from __future__ import annotations

import http.client
import json
import shutil
import ssl
import subprocess
import time

import pytest

from policy_extender import config
from tests.support.bodies import SAMPLES
from tests.support.policies import write_policies
from tests.support.volcano import Server


def self_signed(tmp_path):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    return cert, key


def https_request(port, cert, method, path, body=None):
    context = ssl.create_default_context(cafile=str(cert))
    connection = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=5)
    try:
        connection.request(method, path, body, {"Content-Type": "application/json"} if body else {})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def wait_ready_https(server, cert, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert server.process.poll() is None, server.log()
        try:
            if https_request(server.port, cert, "GET", "/readyz")[0] == 200:
                return
        except (OSError, ssl.SSLError):
            time.sleep(0.1)
    pytest.fail("HTTPS server not ready:\n" + server.log())


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command to make a certificate")
def test_serve_answers_volcano_over_https_and_refuses_plain_http(tmp_path):
    cert, key = self_signed(tmp_path)
    policy_dir = write_policies(tmp_path / "policies", {"gpu.policy": "filter gpu: free_gpu >= task_gpu\n"})
    server = Server(tmp_path, policy_dir, f"sqlite:{tmp_path / 's.sqlite'}", workers=1,
                    extra_args=("--certfile", str(cert), "--keyfile", str(key)))
    try:
        wait_ready_https(server, cert)
        status, body = https_request(server.port, cert, "POST", "/predicate",
                                     (SAMPLES / "predicate.json").read_bytes())
        assert status == 200 and json.loads(body) == {"status": "", "code": 0}
        plain = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
        with pytest.raises((http.client.HTTPException, ConnectionError)):
            plain.request("GET", "/healthz")
            plain.getresponse().read()
        plain.close()
    finally:
        server.stop()


def test_a_certificate_without_its_key_is_a_configuration_error():
    with pytest.raises(config.ConfigError, match="certfile is set but keyfile is not"):
        config.load({"certfile": "cert.pem"}, {})
