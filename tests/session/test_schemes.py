"""The scheme registry (``store_url.SCHEMES``) and the store contract (``session.store.SessionStore``).

One registry names every kind of session store: the configuration checks a setting with it and
the factory opens the store it names, so the two accept exactly the same settings. Every class
it names has every member of the protocol, with the protocol's parameters; the protocol lists
every member the service uses on a store. What each member does is the contract suite of this
directory (the tests taking ``make_store``), run against every registered kind (conftest.py).
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from policy_extender import store_url
from policy_extender.config import ConfigError, load
from policy_extender.session.factory import open_store, store_class
from policy_extender.session.store import SessionStore, StoreOptions
from policy_extender.store_url import SCHEMES, StoreScheme, scheme_of

from tests.support.stores import TEST_SETTINGS

PACKAGE = Path(__file__).resolve().parents[2] / "policy_extender"

#: A setting for each prefix of each registered kind. Opening one does no I/O (a store connects
#: at its first call), so these tests start no server.
EXAMPLES = {
    "sqlite:": "sqlite:/tmp/policy-extender-example.sqlite3",
    "redis://": "redis://127.0.0.1:1/0",
    "rediss://": "rediss://127.0.0.1:1/0",
    "unix://": "unix:///tmp/policy-extender-example.sock?db=0",
    "redis+sentinel://": "redis+sentinel://127.0.0.1:1,127.0.0.1:2/mymaster/0",
}

#: Members read on a store that are one store's own, not the contract's: the SQLite file's
#: generation, read only while a head watch answers (session/head_watch.py, SqliteStore only).
OWN_MEMBERS = {"generation"}


def protocol_methods() -> dict[str, object]:
    """Every method the protocol declares (classmethods included), by name."""
    return {name: value for name, value in vars(SessionStore).items()
            if not name.startswith("_") and (callable(value) or isinstance(value, classmethod))}


def protocol_attributes() -> set[str]:
    return set(SessionStore.__annotations__)


def parameters(function) -> list[tuple[str, object]]:
    return [(p.name, p.kind) for p in inspect.signature(function).parameters.values()]


def by_name(schemes) -> dict:
    return {"argvalues": list(schemes), "ids": [scheme.name for scheme in schemes]}


# -- every registered class keeps the contract --------------------------------------------------


def test_the_protocol_lists_the_session_the_events_and_the_tally():
    assert set(protocol_methods()) == {
        "from_setting", "begin_open", "open", "close", "head", "snapshot", "policy_sources", "allocate", "deallocate",
        "allocations", "changes", "ended", "session_counts", "mark_lost", "lost", "tally_merge", "tally_cycles",
        "tally_read"}
    assert protocol_attributes() == {"ttl_seconds"}
    for name, method in protocol_methods().items():
        assert inspect.getdoc(method), f"SessionStore.{name} says nothing of its contract"


@pytest.mark.parametrize("scheme", **by_name(SCHEMES))
def test_every_registered_class_has_every_protocol_method_with_its_parameters(scheme):
    kind = store_class(scheme)
    for name, declared in protocol_methods().items():
        found = inspect.getattr_static(kind, name, None)
        assert found is not None, f"{kind.__name__} has no {name} (SessionStore in session/store.py)"
        assert isinstance(found, classmethod) == isinstance(declared, classmethod), \
            f"{kind.__name__}.{name}: a classmethod in one and not in the other"
        assert parameters(getattr(kind, name)) == parameters(getattr(SessionStore, name)), \
            f"{kind.__name__}.{name} takes other parameters than SessionStore.{name}"


@pytest.mark.parametrize("prefix, setting", EXAMPLES.items(), ids=EXAMPLES.keys())
def test_a_setting_opens_its_kinds_class_with_every_protocol_attribute(prefix, setting):
    scheme = scheme_of(setting)
    store = open_store(setting, ttl_seconds=7)
    assert type(store) is store_class(scheme)
    for name in protocol_attributes():
        assert hasattr(store, name), f"{type(store).__name__} has no {name} (SessionStore)"
    assert store.ttl_seconds == 7


def test_every_registered_prefix_has_an_example_here():
    assert {prefix for scheme in SCHEMES for prefix in scheme.prefixes} == set(EXAMPLES)


def test_the_contract_suite_knows_how_to_make_every_registered_kind():
    assert set(TEST_SETTINGS) == {scheme.name for scheme in SCHEMES}


def test_the_protocol_lists_every_member_the_service_uses_on_a_store():
    """Every ``<x>.sessions.<member>``, ``sessions.<member>`` and ``self.store.<member>`` of the
    package, outside the stores themselves and SQLite's own head watch, is a protocol member."""
    allowed = set(protocol_methods()) | protocol_attributes() | OWN_MEMBERS
    used = set()
    for path in PACKAGE.rglob("*.py"):
        if path.relative_to(PACKAGE).as_posix() in ("session/sqlite.py", "session/redis.py",
                                                      "session/head_watch.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Attribute) and _is_a_store(node.value):
                used.add((node.attr, f"{path.relative_to(PACKAGE)}:{node.lineno}"))
    assert {member for member, _ in used} >= {"head", "open", "tally_merge"}  # the scan finds uses
    assert sorted(where for member, where in used if member not in allowed) == []


def _is_a_store(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return node.id == "sessions"
    return isinstance(node, ast.Attribute) and (
        node.attr == "sessions" or (node.attr == "store" and isinstance(node.value, ast.Name)
                                    and node.value.id == "self"))


# -- one registry for the configuration and the factory -----------------------------------------


def test_an_unknown_setting_is_refused_alike_at_start_and_by_the_factory():
    expected = ("expected sqlite:PATH, redis://HOST:PORT/DB or "
                "redis+sentinel://[[USER]:PASSWORD@]HOST:PORT[,HOST:PORT...]/MASTER[/DB], got 'memcached://x'")
    with pytest.raises(ValueError) as refused:
        open_store("memcached://x")
    assert str(refused.value) == expected
    with pytest.raises(ConfigError) as at_start:
        load({"session_store": "memcached://x"}, {})
    assert expected in str(at_start.value)


def test_a_malformed_address_of_a_known_kind_is_refused_by_both():
    for refuse in (open_store, lambda setting: load({"session_store": setting}, {})):
        with pytest.raises(ValueError, match="master's name"):
            refuse("redis+sentinel://127.0.0.1:1")


class ExampleStore:
    """A store kind registered by a test: only what the factory calls."""

    def __init__(self, setting: str, options: StoreOptions) -> None:
        self.setting, self.ttl_seconds = setting, options.ttl_seconds

    @classmethod
    def from_setting(cls, setting: str, options: StoreOptions) -> ExampleStore:
        return cls(setting, options)


def test_a_kind_added_to_the_registry_is_accepted_at_start_and_opened_by_the_factory(monkeypatch):
    example = StoreScheme("example", ("example:",), "example:NAME", f"{__name__}:ExampleStore")
    monkeypatch.setattr(store_url, "SCHEMES", SCHEMES + (example,))
    assert load({"session_store": "example:one"}, {}).session_store == "example:one"
    store = open_store("example:one", ttl_seconds=9)
    assert (type(store), store.setting, store.ttl_seconds) == (ExampleStore, "example:one", 9)
    with pytest.raises(ValueError, match=r"redis\+sentinel://\S+ or example:NAME, got 'other:'"):
        open_store("other:")


def test_a_kind_removed_from_the_registry_is_refused_by_both(monkeypatch):
    monkeypatch.setattr(store_url, "SCHEMES", tuple(s for s in SCHEMES if s.name != "redis"))
    with pytest.raises(ValueError, match="expected sqlite:PATH or redis"):
        open_store("redis://127.0.0.1:1/0")
    with pytest.raises(ConfigError, match="expected sqlite:PATH or redis"):
        load({"session_store": "redis://127.0.0.1:1/0"}, {})


def test_the_longest_matching_prefix_decides(monkeypatch):
    assert scheme_of("redis://h/0").name == "redis"
    assert scheme_of("redis+sentinel://h/m").name == "redis+sentinel"
    narrower = StoreScheme("narrower", ("redis+sentinel://only-here",), "redis+sentinel://only-here", "m:C")
    monkeypatch.setattr(store_url, "SCHEMES", SCHEMES + (narrower,))  # listed last, still chosen
    assert scheme_of("redis+sentinel://only-here:1/m").name == "narrower"
    assert scheme_of("redis+sentinel://elsewhere:1/m").name == "redis+sentinel"
