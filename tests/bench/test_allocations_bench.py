"""bench.cpu.allocations runs, prints its method, and its indexed and unindexed apps decide alike."""

import json

import pytest

from bench.cpu import allocations


def test_a_tiny_run_prints_the_method_and_one_line_per_size(capsys):
    allocations.main(["--sizes", "40", "--calls", "5", "--rounds", "1", "--events", "2"])
    out = capsys.readouterr().out
    assert "Method:" in out and "time.process_time" in out and allocations.RULE.strip() in out
    [line] = [line for line in out.splitlines() if "allocations:" in line]
    assert line.split()[0] == "40" and "indexed" in line and "unindexed" in line


@pytest.mark.slow
def test_the_rule_rejects_where_the_job_has_two_gpu_tasks_on_the_node(tmp_path):
    """Allocation k is of job k % 100, on node k % 40, with k % 2 GPUs: job-7's are k = 7 + 100 m,
    all with a GPU, on node-7 (m even) and node-27 (m odd). With 200 allocations that is one on
    each (the rule fits everywhere); with 2,000, ten on each: both nodes refuse, on both apps."""
    for size, refused in ((200, set()), (2000, {"node-7", "node-27"})):
        open_body, events, predicates = allocations.bodies(size)
        base = tmp_path / f"n{size}"
        base.mkdir()
        apps = [allocations.make_app(base, "indexed", allocations.RULE),
                allocations.make_app(base, "unindexed", allocations.RULE, indexed=False)]
        for app in apps:
            allocations.call(app, "/onSessionOpen", open_body)
            for body in events:
                allocations.call(app, "/allocateFunc", body)
            answers = [json.loads(allocations.call(app, "/predicate", body)) for body in predicates]
            assert {f"node-{n}" for n, a in enumerate(answers) if a["code"] != 0} == refused
            app.service.stop()
