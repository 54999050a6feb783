"""Hypothesis strategies that produce policy text: token streams, syntax trees of the grammar
rendered back to text, and mutations of the example policies (``policies/*.policy``)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import strategies as st

from policy_extender import schema
from policy_extender.lang import ast, builtins

POLICIES = sorted((Path(__file__).resolve().parents[2] / "policies").glob("*.policy"))
KINDS = list(schema.DECISION_ROOTS)  # every rule kind
ROOTS = ["task", "node", "job", "queue", "session", "evictor", "evictee", "free_gpu", "task_gpu", "x"]
FIELDS = ["labels", "annotations", "idle", "gpu", "cpu", "tasks", "name", "priority", "requests", "job",
          "queue", "min_available", "ready_tasks", "tolerations", "taints", "allocated", "__class__", "mro"]
#: every builtin of the language (read from its table, so a new one is fuzzed too), and names a
#: policy must never reach (Python's)
BUILTINS = [*sorted(builtins.BUILTINS), "getattr", "eval"]
AGGREGATES = list(ast.AGGREGATES)
BINARY = ["+", "-", "*", "/", "%", "??", "==", "!=", "<", "<=", ">", ">=", "in", "not in", "and", "or"]
NUMBERS = ["0", "1", "2.5", "1e3", "4Gi", "500m", "9223372036854775807", "99999999999999999999", "1e308"]
STRINGS = ['"a"', "'zone-a'", '""', '"9e999999999"', '"(a+)+$"', '".*.*=.*"', '"{0.__class__}"', '"%s%n"',
           '"\\u0000"', "'\\q'", '"[" ']
TOKENS = (KINDS + ROOTS + FIELDS + BUILTINS + AGGREGATES + BINARY + NUMBERS + STRINGS
          + ["when", "let", "reason", "unresolvable", "weight", "normalize", "to", "permit", "if", "then",
             "else", "not", "for", "true", "false", "null", "zone-a:", ".", ",", "(", ")", "[", "]", "=",
             "**", "{", "}", "$", "\n", "\n    ", "#c\n", "\\", "\t"])


def token_streams(max_size: int = 60) -> st.SearchStrategy[str]:
    return st.lists(st.sampled_from(TOKENS), max_size=max_size).map(" ".join)


# --- syntax trees rendered as text ----------------------------------------------------------------

def _atoms() -> st.SearchStrategy[str]:
    return st.one_of(st.sampled_from(NUMBERS), st.sampled_from(STRINGS), st.sampled_from(["true", "false", "null"]),
                     st.sampled_from(ROOTS),
                     st.builds(lambda r, f: f"{r}.{f}", st.sampled_from(ROOTS), st.sampled_from(FIELDS)))


def _extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.builds(lambda a, op, b: f"({a} {op} {b})", inner, st.sampled_from(BINARY), inner),
        st.builds(lambda op, a: f"{op} {a}", st.sampled_from(["-", "not"]), inner),
        st.builds(lambda a, f: f"{a}.{f}", inner, st.sampled_from(FIELDS)),
        st.builds(lambda a, k: f"{a}[{k}]", inner, inner),
        st.builds(lambda f, args: f"{f}({', '.join(args)})", st.sampled_from(BUILTINS), st.lists(inner, max_size=3)),
        st.builds(lambda f, e, v, lst, c: f"{f}({e} for {v} in {lst}{' if ' + c if c else ''})",
                  st.sampled_from(AGGREGATES), inner, st.sampled_from(["x", "t", "task"]), inner,
                  st.one_of(st.none(), inner)),
        st.builds(lambda c, a, b: f"(if {c} then {a} else {b})", inner, inner, inner),
        st.builds(lambda items: "[" + ", ".join(items) + "]", st.lists(inner, max_size=4)),
    )


def expressions() -> st.SearchStrategy[str]:
    return st.recursive(_atoms(), _extend, max_leaves=25)


def _modifier() -> st.SearchStrategy[str]:
    return st.one_of(
        st.builds(lambda e: f"when {e}", expressions()),
        st.builds(lambda t: f'reason "{t}"', st.sampled_from(["x {task.name}", "{node.labels}", "{{}}", "{0.__class__}",
                                                             "%s {x}", "{task.__class__}", "{1 + 2}", "{"])),
        st.sampled_from(["unresolvable", "permit", "weight 2", "weight -1e3", "normalize 0 to 100", "normalize 1 to 1"]),
    )


def _statement() -> st.SearchStrategy[str]:
    rule = st.builds(lambda k, n, e, mods: f"{k} {n}{e}" + "".join(f"\n    {m}" for m in mods),
                     st.sampled_from(KINDS), st.sampled_from(["", "r1: ", "r2: ", "zone-a: "]), expressions(),
                     st.lists(_modifier(), max_size=3))
    let = st.builds(lambda n, e: f"let {n} = {e}", st.sampled_from(["x", "zone", "task", "y"]), expressions())
    guard = st.builds(lambda e: f"when {e}", expressions())
    return st.one_of(rule, rule, let, guard)


def trees() -> st.SearchStrategy[str]:
    """Whole files built from the grammar's statements and expressions, rendered to text."""
    return st.lists(_statement(), min_size=1, max_size=5).map("\n".join)


# --- mutated example policies ----------------------------------------------------------------------

def _mutate(text: str, ops: list[tuple[int, int, str]]) -> str:
    for op, position, insert in ops:
        if not text:
            text = insert
            continue
        i = position % len(text)
        if op == 0:
            text = text[:i] + text[i + 1:]
        elif op == 1:
            text = text[:i] + insert + text[i:]
        elif op == 2:
            text = text[:i] + insert + text[i + 1:]
        else:
            j = (position * 7919) % len(text)
            text = text[:i] + text[min(i, j):max(i, j)] + text[i:]
    return text


def mutated_policies() -> st.SearchStrategy[str]:
    sources = [p.read_text() for p in POLICIES]
    ops = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 10**6), st.sampled_from(TOKENS)), min_size=1, max_size=6)
    return st.builds(_mutate, st.sampled_from(sources), ops)


def deep_nesting(depth: int, opening: str = "1 + (", closing: str = ")") -> str:
    """A filter nesting ``depth`` levels of ``opening``...``closing`` around ``1``."""
    return "filter deep: " + opening * depth + "1" + closing * depth + " > 0\n"


def long_input(chars: int) -> str:
    return "filter long: " + " + ".join(["1"] * (chars // 4)) + " > 0\n"
