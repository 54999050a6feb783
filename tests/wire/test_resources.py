"""Quantities, Resources, Counts and the session envs."""

import subprocess
import sys

import pytest

from policy_extender.wire.quantity import CAP, parse_quantity
from policy_extender.wire.resources import Counts, Resources
from policy_extender.wire.session_views import NO_SESSION, CycleAllocations, PlacedTask, SessionView


@pytest.mark.parametrize("text,value", [
    ("1", 1), ("0", 0), ("500m", 0.5), ("63500m", 63.5), ("2", 2), ("1.5", 1.5), (".5", 0.5),
    ("4Gi", 4 * 2**30), ("534399804Ki", 534399804 * 1024), ("1.5Gi", 1.5 * 2**30),
    ("1k", 1000), ("2M", 2 * 10**6), ("3G", 3 * 10**9), ("1T", 10**12), ("1Ti", 2**40),
    ("1e3", 1000), ("1.5E3", 1500), ("100u", 0.0001), ("5n", 5e-9), ("-2", -2), ("+3", 3),
    ("1E", 10**18), ("1Ei", 2**60), (7, 7), (2.5, 2.5),
])
def test_parse_quantity(text, value):
    assert parse_quantity(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["", "Gi", "1 Gi", "1gi", "lots", "1.2.3", "1Kii", "0x10", True, [1], {"a": 1}, None])
def test_parse_quantity_refuses_garbage(text):
    with pytest.raises(ValueError):
        parse_quantity(text)


@pytest.mark.parametrize("text,value", [
    ("1e400", CAP), ("-1e400", -CAP), ("1e309", CAP), ("1e999999999", CAP), ("-1e" + "9" * 5000, -CAP),
    ("1e-999999999", 0), ("0e999999999", 0), ("9223372036854775807", CAP), ("9223372036854775808", CAP),
    ("12e18", CAP), ("8Ei", CAP), ("7Ei", 7 * 2**60), ("9" * 5000, CAP), ("-" + "9" * 5000 + "Ki", -CAP),
    ("9" * 400 + ".5", CAP), ("0" * 30 + "5", 5), (2**70, CAP), (-10**400, -CAP), (-1e300, -CAP), (1e300, CAP),
])
def test_parse_quantity_caps_the_magnitude_as_kubernetes_does(text, value):
    """Past 2**63 - 1 Kubernetes caps a quantity, so Volcano never sends more; text from elsewhere
    is capped the same way, as an int, and never expanded (no ``10 ** exponent``)."""
    got = parse_quantity(text)
    assert got == value and type(got) is int


@pytest.mark.slow
def test_a_huge_exponent_is_never_expanded():
    """``10 ** 999999999`` took 207 s of CPU holding the GIL (a worker's threads all stalled until
    gunicorn killed it): parsed in a child process, which must be done well within 60 s."""
    code = ("from policy_extender.wire.quantity import parse_quantity as p;"
            "print(p('1e999999999'), p('-7.5e99999'), p('1e+000000999999'), p('1E' + '9' * 4000))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(CAP), str(-CAP), str(CAP), str(CAP)]


def test_whole_quantities_are_ints():
    assert isinstance(parse_quantity("4Gi"), int) and isinstance(parse_quantity("2000m"), int)


def test_resources_from_wire_are_whole_units():
    r = Resources.from_wire({"MilliCPU": 2500, "Memory": 1024, "MaxTaskNum": 110,
                             "ScalarResources": {"nvidia.com/gpu": 2000, "pods": 110, "nvidia.com/gpumem": 81920000}})
    assert (r.cpu, r.memory, r.gpu, r.pods) == (2.5, 1024, 2, 110)
    assert r["nvidia.com/gpumem"] == 81920 and r["gpu"] == 2 and r["hugepages-2Mi"] == 0
    assert r.ephemeral_storage == 0


def test_resources_from_quantities_and_empty():
    r = Resources.from_quantities({"cpu": "500m", "memory": "4Gi", "nvidia.com/gpu": "8", "x": None})
    assert (r.cpu, r.memory, r.gpu, r["x"]) == (0.5, 4 * 2**30, 8, 0)
    assert Resources.from_wire(None).cpu == 0 and Resources.from_quantities(None).gpu == 0
    assert Resources({"cpu": 0}) == Resources()


def test_counts_from_allocations_sum_tasks_and_resources():
    allocs = [("t1", "j1", "q", "n1", {"cpu": 2, "nvidia.com/gpu": 1}),
              PlacedTask("t2", "j1", "q", "n2", {"cpu": 1.5, "memory": 10})]
    c = Counts.from_allocations(allocs)
    assert (c.tasks, c.cpu, c.gpu, c.memory) == (2, 3.5, 1, 10)
    assert Counts.from_allocations([]) == Counts()


def test_tally_groups_by_job_queue_and_node():
    tally = CycleAllocations([("t1", "j1", "q1", "n1", {"gpu": 1}), ("t2", "j2", "q1", "n1", {"gpu": 2}),
                              ("t3", "j2", "q2", "n2", {"gpu": 4})])
    view = tally.session_view("j2", "q1", "n1")
    assert view.open and view.allocated.gpu == 7 and view.allocated.tasks == 3
    assert (view.job.gpu, view.queue.gpu, view.node.gpu) == (6, 3, 3)
    assert view.queues["q2"].tasks == 1 and view.nodes.get("n9") is None
    assert tally.session_view("nope", None, None).job == Counts()


def test_no_session_env():
    assert NO_SESSION.open is False and NO_SESSION.job("x") is None and NO_SESSION.queue("q") is None
    view = NO_SESSION.session_view("j", "q", "n")
    assert isinstance(view, SessionView) and view.open is False
    assert view.allocated.tasks == 0 and view.node.gpu == 0 and view.queues == {}


# --- one amount read off the wire (what the compiler emits for ``node.idle.gpu``) -----------------

ONE_AMOUNT_RESOURCES = [
    "null", "{}", '{"MilliCPU": 2500}', '{"MilliCPU": 2000, "Memory": 1024}', '{"Memory": 1.5}',
    '{"ScalarResources": null}', '{"ScalarResources": {}}',
    '{"MilliCPU": 500, "ScalarResources": {"nvidia.com/gpu": 2000, "pods": 110, "nvidia.com/gpumem": 81920500}}',
    '{"ScalarResources": {"nvidia.com/gpu": null, "pods": null}}',
    '{"ScalarResources": {"nvidia.com/gpu": 1500.0, "ephemeral-storage": 3000}}',
    # a scalar named like a built-in resource wins over it, as in from_wire's loop
    '{"MilliCPU": 4000, "Memory": 8, "ScalarResources": {"cpu": 7000, "memory": 9000}}',
    '{"MilliCPU": -1000, "ScalarResources": {"nvidia.com/gpu": 9.223372036854776e21}}',
    # zeros, halves, nulls and negatives of each kind of amount (the Struct fast path converts inline)
    '{"MilliCPU": 0, "Memory": 0.5, "ScalarResources": {"nvidia.com/gpu": 0, "pods": 3.5}}',
    '{"MilliCPU": null, "Memory": null, "ScalarResources": {"ephemeral-storage": 2500}}',
    '{"MilliCPU": 1, "Memory": -4, "ScalarResources": {"nvidia.com/gpu": -2000, "pods": -1}}',
]
ONE_AMOUNT_NAMES = ["cpu", "memory", "nvidia.com/gpu", "pods", "ephemeral-storage", "nvidia.com/gpumem", "absent"]


@pytest.mark.parametrize("text", ONE_AMOUNT_RESOURCES)
def test_one_amount_is_that_amount_of_the_whole_conversion(text):
    import msgspec

    from policy_extender.wire.resources import amount_from_wire
    from policy_extender.wire.structs import Resource
    for resource in (msgspec.json.decode(text, type=Resource | None), msgspec.json.decode(text)):  # struct, dict
        whole = Resources.from_wire(resource)
        for name in ONE_AMOUNT_NAMES:
            one = amount_from_wire(resource, name)
            assert (one, type(one)) == (whole[name], type(whole[name])), (text, name)


@pytest.mark.parametrize("text", ONE_AMOUNT_RESOURCES)
def test_a_raw_amount_reader_reads_what_one_amount_of_the_field_reads(text):
    """``amount_reader(key, name)(raw)`` is ``amount_from_wire(field_of(raw, key), name)``, value and
    type, on Structs and dicts holding the resource, and on raws without it."""
    import msgspec

    from policy_extender.wire.resources import amount_from_wire, amount_reader, field_of
    from policy_extender.wire.structs import Resource

    class Holder(msgspec.Struct):
        Idle: Resource | None = None

    class Other(msgspec.Struct):  # the read set left ``Idle`` out
        Name: str = "n"

    for resource in (msgspec.json.decode(text, type=Resource | None), msgspec.json.decode(text)):
        raws = [Holder(resource) if not isinstance(resource, dict) else {"Idle": resource},
                {"Idle": resource}, Other(), {}, None, "text", 7]
        for name in ONE_AMOUNT_NAMES:
            read = amount_reader("Idle", name)
            for raw in raws:
                got, want = read(raw), amount_from_wire(field_of(raw, "Idle"), name)
                assert (got, type(got)) == (want, type(want)), (text, name, raw)


def test_views_read_one_amount_of_every_wire_resources_field():
    from policy_extender import schema
    from policy_extender.wire.decode import decode_job, decode_predicate
    from policy_extender.wire.structs import full_reads
    from policy_extender.wire.views import WireResources

    from tests.support.bodies import sample
    request = decode_predicate(sample("predicate"), full_reads())
    views = [request.task, request.node, decode_job(sample("jobReady"), full_reads()).job]
    checked = 0
    for view in views:
        for field in dir(type(view)):
            if not isinstance(getattr(type(view), field, None), WireResources):
                continue
            for short, name in schema.RESOURCE_SHORTHANDS.items():
                expected = getattr(getattr(view, field), short)
                assert (view.amount(field, name), type(view.amount(field, name))) == (expected, type(expected))
                raw_read = type(view).raw_amount_reader(field, name)(view.raw)
                assert (raw_read, type(raw_read)) == (expected, type(expected))
                checked += 1
    assert checked == 5 * 10  # task: requests, init_requests; node: 6 fields; job: allocated, total_request
    # a field that is not read off a Volcano Resource goes through the field itself
    job = views[2]
    assert job.amount("min_resources", "cpu") == job.min_resources.cpu
    assert type(job).raw_amount_reader("min_resources", "cpu") is None
