"""A large upload that does not complete gives its memory back when its call ends (issue 37
item 2), under a real gunicorn (one worker, so every upload goes to the worker measured).

Four onSessionOpen bodies announce 300 MiB: three clients send 150 MiB of jobs and close the
connection (Volcano's ``httpTimeout`` firing during a snapshot upload), one sends 150 MiB and
stalls until the body deadline (a 408). Then the worker's RSS must be back near what it was
before the first, without a garbage collection; and one full collection (``SIGUSR2`` to a worker
started by ``tests.served.gc_probe_serve``, test-only) must find nothing of them: the RSS it frees
is small. With ``keep_body_maps`` on and off (a kept map is let go when a body into it fails).

Before the fix, the receiving thread's exception (stored with its traceback, which holds the
body's buffer, in a list its frame refers to) made a reference cycle: the 600 MiB stayed until a
collection."""

from __future__ import annotations

import json
import os
import signal
import socket
import time

import pytest

from tests.support.bodies import SAMPLES
from tests.support.policies import write_policies
from tests.support.volcano import Server, VolcanoClient

POLICY = {"a.policy": "score 10 * free_gpu\n"}
#: long enough for 150 MiB to be sent and decoded on a loaded 2-core machine
BODY_TIMEOUT = 6.0
ANNOUNCED = 300 << 20
SENT = 150 << 20
MIB = 1024  # KiB
#: what the worker may hold after the aborted uploads beyond its RSS before them (allocator
#: slack, the decoded jobs' caches), far below one upload's 150 MiB
HELD_AT_MOST = 48 * MIB
#: what one full collection may free afterwards
COLLECTED_AT_MOST = 16 * MIB


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def jobs_prefix(size: int) -> bytes:
    """The first ``size`` bytes of a snapshot: ``{"Jobs":{`` and distinct copies of the sample's
    first job (the streamed decode takes each as it arrives)."""
    key, job = next(iter(json.loads((SAMPLES / "onSessionOpen.json").read_bytes())["Jobs"].items()))
    text, parts, total, n = json.dumps(job), [b'{"Jobs":{'], 9, 0
    while total < size:
        unique = f"{key}-{n:06d}"
        part = (("," if n else "") + json.dumps(unique) + ":" + text.replace(key, unique)).encode()
        parts.append(part)
        total += len(part)
        n += 1
    return b"".join(parts)[:size]


def upload(port: int, data: bytes, stall: bool) -> bytes:
    """An onSessionOpen announcing ``ANNOUNCED`` bytes, ``data`` sent, then the connection closed
    (``stall``: kept open until the server answers and closes it); what the server answered."""
    head = (f"POST /onSessionOpen HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {ANNOUNCED}\r\n\r\n").encode()
    with socket.create_connection(("127.0.0.1", port)) as sock:
        try:
            sock.sendall(head + data)
        except (BrokenPipeError, ConnectionResetError):  # cut off by the deadline: aborted all the same
            return b""
        if not stall:
            return b""
        sock.settimeout(BODY_TIMEOUT + 10)
        parts = []
        while chunk := sock.recv(65536):
            parts.append(chunk)
        return b"".join(parts)


@pytest.fixture(scope="module")
def prefix() -> bytes:
    return jobs_prefix(SENT)


@pytest.mark.parametrize("keep_maps", ["true", "false"])
def test_aborted_uploads_give_their_memory_back(tmp_path, prefix, keep_maps):
    probe = tmp_path / "gc-probe.jsonl"
    server = Server(tmp_path, write_policies(tmp_path / "policies", POLICY), workers=1, threads=4,
                    extra_args=("--body-timeout", str(BODY_TIMEOUT), "--keep-body-maps", keep_maps),
                    launcher=("tests.served.gc_probe_serve", str(probe)))
    try:
        server.wait_ready()
        volcano = VolcanoClient(server.port, timeout=30, workers=1)
        try:
            pid = volcano.get("/status")[1]["pid"]
            volcano.call("onSessionOpen", (SAMPLES / "onSessionOpen.json").read_bytes(), fresh=True)
            volcano.call("onSessionClose", b"{}", fresh=True)
            baseline = rss_kib(pid)
            for _ in range(3):
                upload(server.port, prefix, stall=False)
            answer = upload(server.port, prefix, stall=True)  # after the others ended: their calls too
            assert answer.startswith(b"HTTP/1.1 408"), answer[:300]
            time.sleep(0.5)
            held = rss_kib(pid)
            os.kill(pid, signal.SIGUSR2)
            deadline = time.monotonic() + 10
            while not probe.exists() and time.monotonic() < deadline:
                time.sleep(0.1)
            collected = json.loads(probe.read_text().splitlines()[0])
            # the worker serves on, and the session store kept no part of the aborted opens
            assert volcano.call("onSessionOpen", (SAMPLES / "onSessionOpen.json").read_bytes(), fresh=True) == {}
        finally:
            volcano.close()
    finally:
        server.stop()
    figures = {"baseline KiB": baseline, "after the aborted uploads KiB": held, "collection": collected}
    print(figures)
    assert held - baseline < HELD_AT_MOST, figures
    assert collected["rss_before"] - collected["rss_after"] < COLLECTED_AT_MOST, figures
    assert "Traceback" not in server.log(), server.log()[-3000:]
