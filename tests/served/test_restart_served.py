"""The whole service killed in the middle of a cycle and started again (a container restart:
SIGKILL to the master and its workers, then the same command line), with the default ``sqlite:``
store, whose file lives in the killed instance's runtime directory. The restarted instance must
not decide the cycle's calls without its session: it answers 503 for it until the next
onSessionOpen, then decides with the new session. (An explicit ``sqlite:PATH`` keeps the session
across the restart; tests/served/test_store_outages.py and the store tests cover it.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path


from tests.support.bodies import SAMPLES
from tests.support.policies import write_policies
from tests.support.volcano import REPO, VolcanoClient, free_port

JOB = "ml/job-002-8379799c-38b5-481a-ad2d-f76627ecc4bd"  # the sample predicate's task's job
POLICIES = {"session.policy": """\
filter in-session: session.open
  reason "no session"
filter small-gang: task.job.min_available < 5
  reason "gang too big"
"""}


def open_body(min_available: int) -> bytes:
    opened = json.loads((SAMPLES / "onSessionOpen.json").read_bytes())
    opened["Jobs"][JOB]["MinAvailable"] = min_available
    return json.dumps(opened).encode()


def predicates(port: int, times: int = 24) -> set[tuple[int, str]]:
    client = VolcanoClient(port, timeout=10)
    data = (SAMPLES / "predicate.json").read_bytes()
    try:
        answers = client.parallel_map(lambda _: client.raw("predicate", data, fresh=True), range(times))
    finally:
        client.close()
    return {(status, json.loads(answer).get("status", "").rsplit(": ", 1)[-1] if status == 200 else "")
            for status, answer in answers}


def serve(command: list[str], cwd: Path, log: Path) -> subprocess.Popen:
    """The service as a user runs it (no session store, no metrics directory set), in a process
    group of its own (what a container is to a SIGKILL), its runtime directories under ``cwd``
    (as in a container of its own: no other instance on the machine sweeps them meanwhile)."""
    env = {key: value for key, value in os.environ.items()
           if key not in ("PROMETHEUS_MULTIPROC_DIR", "POLICY_EXTENDER_SESSION_STORE")}
    env["PYTHONPATH"] = str(REPO)
    env["POLICY_EXTENDER_RUNTIME_PARENT"] = str(cwd / "run")
    (cwd / "run").mkdir(exist_ok=True)
    with open(log, "ab") as out:
        return subprocess.Popen(command, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)


def ready(process: subprocess.Popen, port: int, workers: int, log: Path, timeout: float = 30.0) -> None:
    client, seen = VolcanoClient(port, timeout=2), set[int]()
    deadline = time.monotonic() + timeout
    try:
        while len(seen) < workers:
            assert process.poll() is None, log.read_text(errors="replace")
            assert time.monotonic() < deadline, f"not ready after {timeout}s:\n{log.read_text(errors='replace')}"
            try:
                if client.get("/readyz")[0] == 200:
                    seen.add(client.get("/status")[1]["pid"])
                    continue
            except OSError:
                pass
            time.sleep(0.05)
    finally:
        client.close()


def kill_all(process: subprocess.Popen) -> None:
    """SIGKILL the whole group (master and workers), and wait until every one of them is gone."""
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.killpg(process.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.01)
    raise AssertionError("the killed service's workers are still running")


def test_a_restart_mid_cycle_answers_503_for_the_cycle_until_the_next_open(tmp_path):
    port = free_port()
    command = [sys.executable, "-m", "policy_extender", "serve", "--bind", f"127.0.0.1:{port}", "--workers", "2",
               "--threads", "4", "--policy-dirs", str(write_policies(tmp_path / "policies", POLICIES)),
               "--reload-interval", "0"]
    log = tmp_path / "serve.log"
    first = serve(command, tmp_path, log)
    restarted = None
    try:
        ready(first, port, 2, log)
        volcano = VolcanoClient(port, timeout=10)
        assert volcano.raw("onSessionOpen", open_body(7), fresh=True)[0] == 200
        assert predicates(port) == {(200, "gang too big")}
        runtime_dir = volcano.get("/status")[1]["runtime_dir"]
        kill_all(first)
        assert os.path.exists(os.path.join(runtime_dir, "sessions.sqlite3"))

        restarted = serve(command, tmp_path, log)  # the same command line, as a container restart
        ready(restarted, port, 2, log)
        after = predicates(port)
        assert after == {(503, "")}, f"the restarted service decided without the cycle's session: {after}"

        assert volcano.raw("onSessionOpen", open_body(3), fresh=True)[0] == 200  # the next cycle
        assert predicates(port) == {(200, "")}
        volcano.close()
    finally:
        for process in (first, restarted):
            if process is not None and process.poll() is None:
                process.terminate()
                process.wait(30)
