"""explain: why a rule came out false, in words, computed only when a rule rejects.

The plan is built at compile time from the rule's AST (so the hot path pays nothing); running it
re-evaluates the sub-expressions it shows. A failing comparison shows both sides' source and
values with the negated operator; ``and`` explains its first operand that is not true; anything
else reads ``<source> is false`` followed by the values of the fields it read.
"""

from __future__ import annotations

from policy_extender.lang import ast, runtime

MAX_EXPLANATION = 1000
MAX_SHOWN_FIELDS = 5
_NEGATED = {"==": "!=", "!=": "==", "<": ">=", "<=": ">", ">": "<=", ">=": "<", "in": "not in", "not in": "in"}


def explainer(expr, compiler):
    """A function of a Context returning the explanation of ``expr`` not being true."""
    plan = _plan(expr, compiler)
    return lambda c: _clip(plan(c))


def _plan(expr, compiler):
    if isinstance(expr, ast.Binary) and expr.op == "and":
        return _plan_and(_conjuncts(expr), compiler)
    if isinstance(expr, ast.Binary) and expr.op in _NEGATED:
        return _plan_comparison(expr, compiler)
    return _plan_generic(expr, compiler)


def _conjuncts(expr) -> list:
    if isinstance(expr, ast.Binary) and expr.op == "and":
        return _conjuncts(expr.left) + _conjuncts(expr.right)
    return [expr]


def _plan_and(parts: list, compiler):
    steps = [(compiler.expr(p), _plan(p, compiler)) for p in parts]

    def explain(c):
        for value, plan in steps:
            if value(c) is not True:
                return plan(c)
        return "the condition is false"
    return explain


def _plan_comparison(expr: ast.Binary, compiler):
    left, right = _side(expr.left, compiler), _side(expr.right, compiler)
    negated = _NEGATED[expr.op]
    return lambda c: f"{left(c)} {negated} {right(c)}"


def _side(node, compiler):
    source = compiler.source(node)
    if isinstance(node, ast.Literal):
        return lambda c: source
    value = compiler.expr(node)
    return lambda c: f"{source} {runtime.fmt(value(c))}"


def _plan_generic(expr, compiler):
    source, value = compiler.source(expr), compiler.expr(expr)
    shown = [(compiler.source(f), compiler.expr(f)) for f in _fields_read(expr, compiler)][:MAX_SHOWN_FIELDS]

    def explain(c):
        result = value(c)
        text = f"{source} is {'false' if result is False else runtime.fmt(result)}"
        details = ", ".join(f"{s} = {runtime.fmt(v(c))}" for s, v in shown if s != source)
        return f"{text} ({details})" if details else text
    return explain


def _fields_read(expr, compiler) -> list:
    """The outermost field/index reads of ``expr`` that do not depend on aggregate variables."""
    found: list = []
    stack = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FieldAccess, ast.Index)) and not _uses_vars(node, compiler):
            found.append(node)
        elif not isinstance(node, ast.Aggregate):
            stack.extend(reversed(ast.children(node)))
    return found


def _uses_vars(node, compiler) -> bool:
    if isinstance(node, ast.Name):
        return compiler.checked.names.get(id(node), ("",))[0] == "var"
    return any(_uses_vars(child, compiler) for child in ast.children(node))


def _clip(text: str) -> str:
    return text if len(text) <= MAX_EXPLANATION else text[: MAX_EXPLANATION - 3] + "..."
