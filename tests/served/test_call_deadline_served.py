"""The deadline through the real service: ``policy-extender serve`` (gunicorn, its gthread worker
setting the request's first byte) over loopback. A prioritize whose score rule is quadratic in the
nodes, over 1,000 nodes: before the fix it ran on for hours of work, a budget per node; now the
call stops at ``volcano_timeout`` and answers 500 (E513), and the worker answers the next call."""

from __future__ import annotations

import json


from policy_extender.wire import compact
from tests.support.policies import write_policies
from tests.support.volcano import Server, VolcanoClient


QUADRATIC = {"cost.policy": "score quadratic: sum(count(m for m in cluster.nodes if m.name == n.name) "
                            "for n in cluster.nodes if n.name != node.name)\nfilter fits: node.idle.gpu >= 0\n"}


def test_a_call_past_volcano_timeout_stops_and_answers_500_over_real_gunicorn(tmp_path):
    nodes = [{"name": f"n{i:04d}", "allocatable": {"nvidia.com/gpu": 8}} for i in range(1000)]
    server = Server(tmp_path, write_policies(tmp_path / "policies", QUADRATIC), workers=1, threads=4,
                    extra_args=("--volcano-timeout", "0.3"))
    client = VolcanoClient(server.port, timeout=60.0)
    try:
        server.wait_ready()
        client.call("onSessionOpen", compact.session_body([], [], nodes))
        status, answer = client.raw("prioritize", json.dumps(compact.prioritize_body({"name": "t"}, nodes)).encode())
        assert status == 500
        error = json.loads(answer)["error"]
        assert "E513" in error and "(rule quadratic)" in error and "elements visited" in error
        # the one worker is free again: a cheap call is answered
        fits = client.call("predicate", compact.predicate_body({"name": "t"}, nodes[0]))
        assert fits == {"status": "", "code": 0}
        logged = [line for line in server.log().splitlines() if "prioritize failed: cost.policy:1:" in line]
        assert logged and all("error[E513]" in line for line in logged)  # file:line:col, and no traceback:
        assert "Traceback" not in server.log()
    finally:
        client.close()
        server.stop()
