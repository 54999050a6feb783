"""What an entry of the verb table (``policy_extender/decide/table.py``) must give, and that the
code around the table reaches a verb's specifics through its entry, never by its name
(docs/extending.md, "A verb"): a verb added to the table without one of its parts fails here."""

from __future__ import annotations

import ast
import dataclasses
import inspect
from pathlib import Path

import pytest

from policy_extender import schema
from policy_extender.decide import handlers, kube_table, observe, table, tally_shapes
from policy_extender.decide.kube_table import KUBE_VERBS
from policy_extender.decide.table import DECIDING, SHAPES, VERB_KINDS, VERBS, Verb
from policy_extender.verb_names import kube_scheduler
from policy_extender.fixture_runner import bodies, kube as kube_cases, model
from policy_extender.wire import compact

PACKAGE = Path(__file__).resolve().parents[2] / "policy_extender"

#: the module where the table takes Volcano's verb names from, and its constants (``PREDICATE``...)
(NAMES,) = [m for m in vars(table).values() if inspect.ismodule(m) and getattr(m, "VERB_KINDS", None) is VERB_KINDS]
_NAME_CONSTANTS = {name for name in dir(NAMES) if getattr(NAMES, name) in VERB_KINDS}
#: every protocol's table: Volcano's and kube-scheduler's (docs/extending.md, "A protocol")
TABLES = {"volcano": VERBS, "kube-scheduler": KUBE_VERBS}
EVERY_VERB = {name: verb for verbs in TABLES.values() for name, verb in verbs.items()}
EVERY_DECIDING = [name for name, verb in EVERY_VERB.items() if verb.decide is not None]

#: the answer shapes the fixture runner compares (fixture_runner/expect.py, compare.py)
ANSWERS = ("fit", "scores", "victims", "vote")


def _overrides(shape: tally_shapes.Shape, method: str) -> bool:
    return getattr(type(shape), method) is not getattr(tally_shapes.Shape, method)


def missing_parts(verb: Verb) -> list[str]:
    """The parts a deciding verb's entry lacks: what its handler, its audit rules, the tally and
    ``/why``, ``policy-extender why`` and the fixture runner need."""
    missing = [part for part in ("decode", "decide", "encode", "outcome", "audit") if not callable(getattr(verb, part))]
    shape = verb.tally
    if not isinstance(shape, tally_shapes.Shape) or not shape.keys:
        missing.append("tally")
    else:  # how it is recorded, shown by /why (JSON) and printed by `policy-extender why`
        missing += [f"tally.{method}" for method in ("record", "section", "lines") if not _overrides(shape, method)]
    if verb.compact is None or getattr(compact, getattr(verb.compact, "__name__", ""), None) is not verb.compact:
        missing.append("compact")  # a builder of wire.compact, the fixture body from `inputs`
    if not verb.inputs or any(name not in bodies.INPUT_KINDS for name in verb.inputs):
        missing.append("inputs")
    if not verb.decision:
        missing.append("decision")
    if not verb.rule_kinds or any(kind not in schema.DECISION_ROOTS for kind in verb.rule_kinds):
        missing.append("rule_kinds")
    if not verb.expect:
        missing.append("expect")
    if verb.answer not in ANSWERS or (verb.answer == "vote" and not (verb.answer_key and verb.value_name)):
        missing.append("answer")
    if verb.handle is not None:
        missing.append("no handle (a deciding verb is answered by handlers.deciding)")
    return missing


@pytest.mark.parametrize("name", EVERY_DECIDING)
def test_a_deciding_verb_gives_every_part_its_calls_need(name):
    assert missing_parts(EVERY_VERB[name]) == []


@pytest.mark.parametrize("protocol", TABLES)
def test_each_table_serves_its_protocol_under_kinds_no_other_table_has(protocol):
    verbs = TABLES[protocol]
    assert {verb.protocol for verb in verbs.values()} == {protocol}
    others = {name for other, table_verbs in TABLES.items() if other != protocol for name in table_verbs}
    assert not set(verbs) & others
    assert set(kube_table.KUBE_VERBS) == set(kube_scheduler.VERB_KINDS) and kube_table.DECIDING == kube_scheduler.VERB_KINDS


@pytest.mark.parametrize("protocol", TABLES)
def test_a_fixture_case_takes_its_inputs_body_and_expectations_from_the_table(protocol):
    """One source of truth: what a case of a decision gives and may expect is its entry's."""
    decisions, builders = {"volcano": (model.DECISIONS, bodies.COMPACT_BODIES),
                           "kube-scheduler": (kube_cases.DECISIONS, kube_cases.BODIES)}[protocol]
    entries = {verb.decision: verb for verb in TABLES[protocol].values() if verb.decide is not None}
    assert set(decisions) == set(entries)
    for name, verb in entries.items():
        assert (decisions[name].verb, decisions[name].compact_inputs) == (verb.name, verb.inputs), name
        assert decisions[name].expect_keys == verb.expect | {"audit"}, name
        assert builders[name] == (verb.compact, verb.inputs), name


def test_a_kube_scheduler_verb_answers_its_errors_in_go_keys():
    """kube-scheduler's types have no json tags: an error answer is ``{"Error": ...}``; only the
    filter has an error field in its answer (a 200 kube-scheduler turns into a failed attempt)."""
    for verb in KUBE_VERBS.values():
        assert verb.error_body is not None and verb.error_body("x") == b'{"Error":"x"}'
    assert [v.name for v in KUBE_VERBS.values() if v.error_in_answer is not None] == [kube_scheduler.FILTER]


@pytest.mark.parametrize("name", [n for n in VERB_KINDS if n not in DECIDING])
def test_a_verb_that_decides_nothing_gives_its_handler_and_no_deciding_part(name):
    verb = VERBS[name]
    assert callable(verb.handle) and callable(verb.decode)
    assert (verb.decide, verb.encode, verb.audit, verb.tally, verb.compact) == (None,) * 5


@pytest.mark.parametrize("part", ["audit", "tally", "compact", "encode"])
def test_an_entry_without_a_part_is_caught(part):
    """The check above is not vacuous: an entry with one part taken away fails it."""
    assert part in missing_parts(dataclasses.replace(VERBS["jobReady"], **{part: None}))


def test_an_entry_whose_tally_shape_does_not_show_it_is_caught():
    class Unshown(tally_shapes.Shape):
        keys = ("x",)

        def record(self, tally, head, verb, request, decision, outcome, audits, request_id) -> None:
            pass

    assert missing_parts(dataclasses.replace(VERBS["jobReady"], tally=Unshown())) == ["tally.section", "tally.lines"]


def test_every_verb_is_served_and_every_deciding_verb_has_its_after_step():
    assert set(handlers.HANDLERS) == set(EVERY_VERB) and tuple(VERBS) == VERB_KINDS
    for name in EVERY_DECIDING:
        assert callable(observe.after(EVERY_VERB[name]))
    with pytest.raises(ValueError):
        observe.after(VERBS["onSessionOpen"])


def test_the_tally_shows_each_deciding_verb_by_its_entrys_shape():
    assert {VERBS[name].tally for name in DECIDING} == set(SHAPES)
    assert {KUBE_VERBS[name].tally for name in kube_table.DECIDING} == set(kube_table.SHAPES)
    keys = tally_shapes.shown_keys(SHAPES + kube_table.SHAPES)
    assert len(keys) == len(set(keys))  # no two shapes write the same /why key, in either table
    paths = [getattr(shape, "path", None) or getattr(shape, "paths", None) for shape in SHAPES + kube_table.SHAPES]
    assert len(paths) == len(set(paths))  # nor the same tally path


#: modules that once switched on the verb (observe.AFTER, audit.evaluate, Tally.record_*,
#: why.describe, the builder named by a string, web's streamed verbs and notable calls, record's
#: head reads and redacted answers): they reach a verb through its entry now; and every module of
#: web/ and record/, which serve and record a call by what its entry says (``Verb.session``,
#: ``stream``, ``notable``, ``redact_answer``)
THROUGH_THE_TABLE = sorted({"decide/observe.py", "decide/audit.py", "decide/tallying.py", "decide/tally_shapes.py",
                            "decide/policy_set.py", "decide/rules.py", "decide/verbs.py", "decide/worker_state.py",
                            "session/tally.py", "commands/why.py", "fixture_runner/bodies.py",
                            *(str(p.relative_to(PACKAGE)) for folder in ("web", "record")
                              for p in (PACKAGE / folder).glob("*.py"))})


@pytest.mark.parametrize("module", THROUGH_THE_TABLE)
def test_the_code_around_the_table_never_names_a_verb(module):
    tree = ast.parse((PACKAGE / module).read_text(encoding="utf-8"))
    imported = [node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
    imported += [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names]
    assert not [m for m in imported if m and "verb_names" in m.split(".")], f"{module} imports the verb names"
    literals = {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)}
    kinds = set(VERB_KINDS) | set(kube_scheduler.VERB_KINDS)
    assert not literals & kinds, f"{module} writes a verb's name: {sorted(literals & kinds)}"
    assert not [node for node in ast.walk(tree) if isinstance(node, ast.Attribute) and node.attr in _NAME_CONSTANTS]


def test_how_a_verb_is_served_and_recorded_is_in_its_entry():
    every = {**VERBS, **KUBE_VERBS}
    assert {v.session for v in every.values()} <= {table.SESSION_CACHE, table.SESSION_STORE, table.SESSION_OPENS,
                                                   table.SESSION_NONE}
    # exactly one verb opens the session; kube-scheduler's have none; a verb that reads the store
    # itself decides nothing (its handler is its own)
    assert [n for n, v in every.items() if v.session == table.SESSION_OPENS] == [NAMES.ON_SESSION_OPEN]
    assert all(v.session == table.SESSION_NONE for v in KUBE_VERBS.values())
    assert all(v.handle is not None and v.decide is None for v in every.values() if v.session == table.SESSION_STORE)
    # the bodies that grow with the cluster are decoded while they arrive; victims answers are redacted
    assert {n for n, v in every.items() if v.stream is not None} == {NAMES.ON_SESSION_OPEN, NAMES.PRIORITIZE}
    assert {n for n, v in every.items() if v.redact_answer} == {NAMES.PREEMPTABLE, NAMES.RECLAIMABLE}
