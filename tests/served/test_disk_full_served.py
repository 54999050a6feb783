"""The disk under the SQLite store fills during onSessionOpen, under real gunicorn (a real 1 MiB
tmpfs; the tests run as root, as CI does). The open fails (500: Volcano logs it failed), and the
calls of that cycle must not decide from the previous cycle's session, which the store would
otherwise keep current: they see no session, on every worker, and the next open that fits is
right again."""

from __future__ import annotations

import json


from tests.session.small_disk import small_tmpfs
from tests.support.bodies import SAMPLES
from tests.support.policies import write_policies
from tests.support.volcano import Server, VolcanoClient

JOB = "ml/job-002-8379799c-38b5-481a-ad2d-f76627ecc4bd"  # the sample predicate's task's job
POLICIES = {"session.policy": """\
filter in-session: session.open
  reason "no session"
filter small-gang: task.job.min_available < 5
  reason "gang too big"
"""}
#: small jobs added to the open that fills the disk: their pruned snapshot is several MiB
FILLER_JOBS = 60_000


def body(verb: str) -> dict:
    return json.loads((SAMPLES / f"{verb}.json").read_bytes())


def open_body(min_available: int, filler_jobs: int = 0) -> bytes:
    opened = body("onSessionOpen")
    opened["Jobs"][JOB]["MinAvailable"] = min_available
    for n in range(filler_jobs):
        uid = f"filler/job-{n:06d}-{'x' * 40}"
        opened["Jobs"][uid] = {"UID": uid, "Name": uid[7:], "Namespace": "filler", "Queue": "default",
                               "MinAvailable": n + 1}
    return json.dumps(opened).encode()


def predicates(client: VolcanoClient, times: int = 24) -> set[tuple[int, str]]:
    data = json.dumps(body("predicate")).encode()
    answers = client.parallel_map(lambda _: client.raw("predicate", data, fresh=True), range(times))
    return {(status, json.loads(answer).get("status", "").rsplit(": ", 1)[-1] if status == 200 else "")
            for status, answer in answers}


def test_an_open_the_full_disk_refuses_leaves_no_decision_on_the_previous_session(tmp_path):
    with small_tmpfs(tmp_path / "small", "1m") as disk:
        server = Server(tmp_path, write_policies(tmp_path / "policies", POLICIES),
                        f"sqlite:{disk / 'sessions.sqlite3'}", workers=2)
        try:
            server.wait_ready()
            client = VolcanoClient(server.port, timeout=60)
            assert client.raw("onSessionOpen", open_body(7), fresh=True)[0] == 200
            assert predicates(client) == {(200, "gang too big")}  # both workers read the session

            status, answer = client.raw("onSessionOpen", open_body(3, FILLER_JOBS), fresh=True)
            assert status == 500 and b"full" in answer, answer[:300]
            assert predicates(client) == {(200, "no session")}, "decided with the previous cycle's session"

            assert client.raw("onSessionOpen", open_body(3), fresh=True)[0] == 200
            assert predicates(client) == {(200, "")}
            client.close()
        finally:
            server.stop()
