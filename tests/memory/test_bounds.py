"""What a worker keeps stays bounded however long it serves (issue 16 item 4; the RSS over time
is measured by ``python -m bench.memory.served``, never asserted here)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from policy_extender import heap

pytestmark = pytest.mark.skipif(heap.malloc_info() is None, reason="needs glibc's mallinfo2")

#: In a fresh interpreter: free a 20 MB block (glibc then raises its mmap threshold to 20 MB),
#: allocate 8 MB and print whether that block was mmapped (glibc's count of mapped bytes grew by
#: it) rather than carved from the heap, where a freed block stays with the thread's arena.
PROBE = textwrap.dedent("""
    import sys, types
    from policy_extender import heap
    {setup}
    big = bytearray(20 << 20); del big
    before = heap.malloc_info().hblkhd
    body = bytearray(8 << 20)
    print(heap.malloc_info().hblkhd - before >= 8 << 20)
""")


def mapped_after_a_bigger_free(setup: str, env: dict | None = None) -> bool:
    out = subprocess.run([sys.executable, "-c", PROBE.format(setup=setup)], check=True,
                         capture_output=True, text=True, env=env).stdout
    return out.strip() == "True"


@pytest.mark.slow
def test_without_the_bound_glibc_keeps_an_8_mb_body_in_its_heap():
    """The behaviour the bound exists for (so the tests below can fail)."""
    assert not mapped_after_a_bigger_free("")


@pytest.mark.slow
def test_bound_large_allocations_maps_every_large_block():
    assert mapped_after_a_bigger_free("assert heap.bound_large_allocations()")


@pytest.mark.slow
def test_a_served_worker_gets_the_bound_from_its_gunicorn_hooks(tmp_path):
    """``serve``'s gunicorn settings set it in the master (inherited by the forked workers) and
    again in each worker after init."""
    master = ("from policy_extender.config import Config; from policy_extender import gunicorn_conf;"
              "gunicorn_conf.settings(Config())['on_starting'](None)")
    worker = ("from policy_extender.config import Config; from policy_extender import gunicorn_conf;"
              "gunicorn_conf.settings(Config())['post_worker_init'](types.SimpleNamespace(wsgi=None))")
    assert mapped_after_a_bigger_free(master, {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)})
    assert mapped_after_a_bigger_free(worker)


def test_policy_info_in_one_process_names_the_last_version_only(monkeypatch):
    """A swap every second must leave nothing per version behind in a process without workers."""
    from policy_extender import metrics
    monkeypatch.delenv(metrics.MULTIPROC_ENV, raising=False)
    monkeypatch.setattr(metrics, "_metrics", None)
    for n in range(500):
        metrics.set_policy_status(f"v{n}", float(n), True, 0)
    m = metrics.metrics()
    samples = {tuple(s.labels.values()): s.value for f in m.registry.collect()
               if f.name == "policy_extender_policy_info" for s in f.samples}
    assert samples == {("v499",): 1.0}
    assert not [k for k in m.children if k[0] == id(m.policy_info)]


@pytest.mark.slow
def test_policy_versions_write_no_key_into_the_prometheus_files(tmp_path):
    """In multiprocess mode prometheus_client keeps every key a process wrote, in its files and
    their index, for good: 300 versions must add none (the served version is a file of its own,
    replaced whole), and the scrape names the last one only."""
    script = (
        "from policy_extender import metrics\n"
        "for n in range(301):\n"
        "    metrics.set_policy_status(f'v{n}', float(n), True, 0)\n"
        "import sys; sys.stdout.write(metrics.render()[0].decode())\n")
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    text = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                          check=True).stdout
    from prometheus_client.mmap_dict import MmapedDict
    keys = [key for path in tmp_path.glob("*.db") for key, *_ in MmapedDict.read_all_values_from_file(str(path))]
    assert keys and not [k for k in keys if "policy_info" in k or '"v1' in k], keys
    assert len(list(tmp_path.glob("policy-version-*"))) == 1  # the one process's, no temporary left
    info = [line for line in text.splitlines() if line.startswith("policy_extender_policy_info{")]
    assert info == ['policy_extender_policy_info{version="v300"} 1.0']


@pytest.mark.slow
def test_policy_versions_leave_no_value_object_in_prometheus_clients_list(tmp_path):
    """In multiprocess mode prometheus_client keeps every value object it made in a list (for its
    reset after a fork); 300 versions must not leave 300 of them there. Run in a fresh process:
    the client picks its multiprocess value class at import, from the environment."""
    script = (
        "from policy_extender import metrics\n"
        "from prometheus_client import values\n"
        "init = values.ValueClass.__init__\n"
        "held = init.__closure__[init.__code__.co_freevars.index('values')].cell_contents\n"
        "metrics.set_policy_status('v0', 0.0, True, 0)\n"
        "before = len(held)\n"
        "for n in range(1, 301):\n"
        "    metrics.set_policy_status(f'v{n}', float(n), True, 0)\n"
        "print(before, len(held))\n")
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    before, after = map(int, out.stdout.split())
    assert before > 0 and after == before, out.stdout


#: In a fresh interpreter: 8 threads each allocate (through malloc: objects over 512 bytes) while
#: all are alive; print how many malloc arenas glibc then reports (``malloc_stats`` on stderr).
ARENAS = textwrap.dedent("""
    import ctypes, threading, types
    from policy_extender import heap
    {setup}
    barrier, keep = threading.Barrier(8), []
    def work():
        blocks = [bytes(1000 + i) for i in range(200)]
        barrier.wait()
        keep.append(blocks)
    threads = [threading.Thread(target=work) for _ in range(8)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    ctypes.CDLL("libc.so.6").malloc_stats()
""")


def arenas_after_8_threads(setup: str, env: dict | None = None, arena_max: int | None = None) -> int:
    env = {k: v for k, v in (env or os.environ).items() if k != "MALLOC_ARENA_MAX"}
    if arena_max is not None:
        env["MALLOC_ARENA_MAX"] = str(arena_max)
    err = subprocess.run([sys.executable, "-c", ARENAS.format(setup=setup)], check=True,
                         capture_output=True, text=True, env=env).stderr
    return sum(line.startswith("Arena ") for line in err.splitlines())


@pytest.mark.slow
def test_without_the_cap_each_thread_gets_an_arena_of_its_own():
    """What the cap exists for (so the tests below can fail)."""
    assert arenas_after_8_threads("") == 9


@pytest.mark.slow
def test_bound_arenas_caps_them_at_two():
    assert arenas_after_8_threads("assert heap.bound_arenas()") == heap.ARENA_MAX == 2


@pytest.mark.slow
def test_a_served_worker_gets_the_arena_cap_from_its_gunicorn_hooks(tmp_path):
    master = ("from policy_extender.config import Config; from policy_extender import gunicorn_conf;"
              "gunicorn_conf.settings(Config())['on_starting'](None)")
    worker = ("from policy_extender.config import Config; from policy_extender import gunicorn_conf;"
              "gunicorn_conf.settings(Config())['post_worker_init'](types.SimpleNamespace(wsgi=None))")
    assert arenas_after_8_threads(master, {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}) == 2
    assert arenas_after_8_threads(worker) == 2


@pytest.mark.slow
def test_an_operators_malloc_arena_max_stands():
    assert arenas_after_8_threads("assert not heap.bound_arenas()", arena_max=4) == 4
