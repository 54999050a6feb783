"""compile: checked AST → closures, built once per policy set; evaluation never walks the tree.

Every expression becomes a function of one ``Context`` (the decision's roots, resolved lazily,
and the aggregate variable slots). Type knowledge from the checker picks the specialised closure
at compile time, so the run-time paths carry no type dispatch where the types are known.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any, Callable

from policy_extender import schema
from policy_extender.errors import EvalError
from policy_extender.lang import ast, runtime, types
from policy_extender.lang.budget import current as current_budget
from policy_extender.lang.builtins import BUILTINS
from policy_extender.lang.checker import Checked, CheckedRule
from policy_extender.lang.explain import explainer
from policy_extender.lang.runtime import Context
from policy_extender.schema import INDEXED

Fn = Callable[["Context"], Any]  # a policy value: the checker, not Python, knows its type
_ORDER = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
_ALWAYS_PRESENT = frozenset({"task", "node", "evictor", "evictee"})
_UNSEEN = object()
_CAUGHT = (TypeError, ValueError, AttributeError, OverflowError, ZeroDivisionError, IndexError, KeyError)


@dataclass
class CompiledRule:
    name: str
    kind: str
    file: str
    line: int
    column: int
    applies: Fn | None     # None: always applies
    test: Fn
    reason: Fn | None      # renders the reason template
    explain: Fn            # the automatic explanation of a false/null result
    source: str            # the rule's expression as written
    unresolvable: bool
    weight: float
    normalize: tuple[float, float] | None
    permit: bool
    abstain_if_none: bool = False  # victim rules: `if none abstain`
    audit: bool = False            # a shadow rule: evaluated and counted, never decides
    #: the schedulers it serves (its file's ``protocol`` statement)
    protocols: frozenset[str] = schema.DEFAULT_PROTOCOLS
    #: the reason's text when its template has no {expression} (the same on every call), else None
    constant_reason: str | None = None

    def __post_init__(self) -> None:
        where = f"{self.file}:{self.line}"
        #: what a reason starts with: ``name (file:line): ``, or ``name: `` when the name is the place
        self.prefix = f"{self.name}: " if self.name == where else f"{self.name} ({where}): "

    def evaluate(self, fn: Fn, c: Context):
        try:
            return fn(c)
        except EvalError as err:
            err.rule = err.rule or self.name
            raise


def compile_rules(checked: Checked, probe=None) -> list[CompiledRule]:
    """The rules compiled; with a ``lang.probe.Probe``, their guards and the operands of every
    ``and``/``or`` record their outcomes there (expression coverage of the fixture runner)."""
    compiler = Compiler(checked, probe)
    return [compiler.rule(r) for r in checked.rules]


def _constant_text(template: ast.Template | None) -> str | None:
    """A template's text when it has no {expression}, else None."""
    if template is None or not all(isinstance(p, str) for p in template.parts):
        return None
    return "".join(template.parts)  # type: ignore[arg-type]  # every part is a str: tested above


class Compiler:
    def __init__(self, checked: Checked, probe=None):
        self.checked = checked
        self.lets: dict[int, Fn] = {}
        self.probe = probe  # lang.probe.Probe, or None (served sets)

    def type_of(self, node) -> str:
        return self.checked.types.get(id(node), "any")

    def source(self, node) -> str:
        span = node.span
        lines = self.checked.sources.get(span.file, "").split("\n")
        if span.line == span.end_line and span.line <= len(lines):
            return lines[span.line - 1][span.column - 1:span.end_column - 1]
        if span.file.startswith("<shorthand"):
            return span.file
        return " ".join(line.strip() for line in lines[span.line - 1:span.end_line])[:200]

    def rule(self, checked: CheckedRule) -> CompiledRule:
        rule = checked.rule
        guards = [self.expr(g) for g in checked.guards]
        if len(guards) == 1 and _bool_valued(checked.guards[0]):
            applies: Fn | None = guards[0]  # True or False already: no ``is True`` layer (a call less per rule)
        else:
            applies = _all_true(guards) if guards else None
        if self.probe is not None and applies is not None:
            applies = self.probe.guard((checked.file, rule.span.line, rule.span.column), applies)
        return CompiledRule(
            checked.name, checked.kind, checked.file, rule.span.line, rule.span.column,
            applies, self.expr(rule.expr),
            self.template(checked.reason) if checked.reason else None, explainer(rule.expr, self),
            self.source(rule.expr),
            checked.unresolvable, checked.weight, checked.normalize, checked.permit,
            checked.abstain_if_none, checked.audit, checked.protocols, _constant_text(checked.reason))

    def template(self, template: ast.Template) -> Fn:
        constant = _constant_text(template)
        if constant is not None:  # no {expression}: the text itself
            return lambda c: constant
        parts = [p if isinstance(p, str) else self.expr(p) for p in template.parts]
        text = runtime.text
        return lambda c: "".join(p if isinstance(p, str) else text(p(c)) for p in parts)

    def expr(self, node) -> Fn:
        return getattr(self, f"expr_{type(node).__name__}")(node)

    # --- atoms -----------------------------------------------------------------------------------

    def expr_Literal(self, node: ast.Literal) -> Fn:
        value = node.value
        return lambda c: value

    def expr_ListLit(self, node: ast.ListLit) -> Fn:
        if all(isinstance(i, ast.Literal) for i in node.items):
            constant = [i.value for i in node.items]  # type: ignore[union-attr]  # all Literal: tested above
            return lambda c: constant
        fns = [self.expr(i) for i in node.items]
        return lambda c: [f(c) for f in fns]

    def expr_Name(self, node: ast.Name) -> Fn:
        what, target = self.checked.names[id(node)]
        if what == "var":
            return lambda c: c.vars[target]
        if what == "let":
            if id(target) not in self.lets:
                self.lets[id(target)] = self.expr(target.expr)
            return self.lets[id(target)]
        if what == "short":
            return self.expr(target)
        return operator.attrgetter(target)

    # --- access ----------------------------------------------------------------------------------

    def expr_FieldAccess(self, node: ast.FieldAccess) -> Fn:
        owner = self.type_of(node.obj)
        name = node.name
        if types.is_map(owner):
            return _map_get(self.expr(node.obj), name)
        if owner in schema.TYPES:
            direct = self.root_path(node)
            if direct is not None:
                return self.wire_amount(node, direct) or operator.attrgetter(direct)
            return _attribute(self.expr(node.obj), operator.attrgetter(name))
        return _any_get(self.expr(node.obj), name)

    def root_path(self, node: ast.FieldAccess) -> str | None:
        """``node.idle.gpu`` as one attrgetter path: the root is always present and every step
        between is a ``resources``/``counts`` object the views always fill."""
        steps = [node.name]
        root: ast.Expr = node.obj
        while isinstance(root, ast.FieldAccess) and self.type_of(root) in ("resources", "counts"):
            steps.append(root.name)
            root = root.obj
        resolved = self.checked.names.get(id(root)) if isinstance(root, ast.Name) else None
        if not resolved or resolved[0] != "root" or resolved[1] not in _ALWAYS_PRESENT:
            return None
        return ".".join([resolved[1], *reversed(steps)])

    def wire_amount(self, node: ast.FieldAccess, direct: str) -> Fn | None:
        """``node.idle.gpu`` (a root's ``resources`` field, then a shorthand) read as one amount,
        converting only that resource instead of building the whole ``resources`` object: a root
        whose class has a ``raw_amount_reader`` (the wire views) through that reader, one function
        of its raw object; another with an ``amount(field, name)`` method through that; any other
        root by ``direct``."""
        if direct.count(".") != 2 or self.type_of(node.obj) != "resources":
            return None
        root, field, name = direct.split(".")
        if name not in schema.RESOURCE_SHORTHANDS:
            return None
        get_root, generic, full = operator.attrgetter(root), operator.attrgetter(direct), schema.RESOURCE_SHORTHANDS[name]
        readers: dict[type, Fn | None] = {}  # root class -> its raw amount reader (None: it has none)
        last: tuple = (None, None)  # the root class read last and its reader, replaced as one tuple

        def amount(c):
            nonlocal last
            o = get_root(c)
            kind, read = last
            if type(o) is not kind:  # a class not read last (one compare, not a dict lookup, per call)
                kind = type(o)
                read = readers.get(kind, _UNSEEN)
                if read is _UNSEEN:
                    make = getattr(kind, "raw_amount_reader", None)
                    read = make(field, full) if make is not None else None
                    if len(readers) < 16:  # the view classes, a few test doubles: bounded anyway
                        readers[kind] = read
                last = (kind, read)
            if read is not None:
                return read(o.raw)
            method = getattr(o, "amount", None)
            return method(field, full) if method is not None else generic(c)
        return amount

    def expr_Index(self, node: ast.Index) -> Fn:
        obj, owner = self.expr(node.obj), self.type_of(node.obj)
        if isinstance(node.key, ast.Literal) and isinstance(node.key.value, str) and types.is_map(owner):
            return self.wire_map_value(node.obj, node.key.value) or _map_get(obj, node.key.value)
        return _index(obj, self.expr(node.key))

    def wire_map_value(self, node, key: str) -> Fn | None:
        """``task.annotations["x"]`` (a root's map field, a literal key) read off the root's raw
        object in one ``attrgetter`` where its class gives the field's path (``raw_map_path``:
        the wire views' Go maps), without the view property's call; through the field itself
        where the path does not reach (a step None, a dict or absent) and for any other root.
        The value is ``_map_get``'s: the key's value in a dict, else None."""
        if not isinstance(node, ast.FieldAccess):
            return None
        direct = self.root_path(node)
        if direct is None or direct.count(".") != 1:
            return None
        root, field = direct.split(".")
        get_root, generic = operator.attrgetter(root), operator.attrgetter(direct)
        last: tuple = (None, None)  # the root class read last and its path, replaced as one tuple

        def value(c):
            nonlocal last
            o = get_root(c)
            kind, path = last
            if type(o) is not kind:
                kind = type(o)
                make = getattr(kind, "raw_map_path", None)
                path = make(field) if make is not None else None
                last = (kind, path)
            if path is None:
                m = generic(c)
            else:
                try:
                    m = path(o.raw)
                except AttributeError:
                    m = generic(c)
            return m.get(key) if isinstance(m, dict) else None
        return value

    def expr_Call(self, node: ast.Call) -> Fn:
        args = [self.argument(a) for a in node.args]
        if node.func == "count" and len(args) == 1:
            inner = args[0]
            return lambda c: len(v) if isinstance(v := inner(c), list) else 0
        builtin = BUILTINS[node.func]
        return _call(builtin.impl, args, builtin.nulls, node.span)

    def argument(self, node) -> Fn:
        if id(node) in self.checked.prepared:
            prepared = self.checked.prepared[id(node)]
            return lambda c: prepared
        return self.expr(node)

    # --- operators -------------------------------------------------------------------------------

    def expr_Unary(self, node: ast.Unary) -> Fn:
        f = self.expr(node.operand)
        if node.op == "not":
            return lambda c: f(c) is not True
        return lambda c: -v if runtime.is_number(v := f(c)) else None

    def expr_Binary(self, node: ast.Binary) -> Fn:
        fl, fr = self.expr(node.left), self.expr(node.right)
        op = node.op
        if self.probe is not None and op in ("and", "or"):
            fl = self.probe.operand(node.left.span, self.source(node.left), fl)
            fr = self.probe.operand(node.right.span, self.source(node.right), fr)
        if op == "and":
            return lambda c: fl(c) is True and fr(c) is True
        if op == "or":
            return lambda c: fl(c) is True or fr(c) is True
        if op == "??":
            return lambda c: fr(c) if (v := fl(c)) is None else v
        if op in ast.ARITHMETIC:
            return _arithmetic(op, fl, fr, node.span)
        if op in ("in", "not in"):
            want, span = op == "in", node.span
            return lambda c: runtime.contains(_spent(c, fr(c), span), fl(c)) is want
        if op in ("==", "!=") and _is_null(node.right) and not _is_null(node.left):
            return _null_test(fl, op == "==", node.span)
        if op in ("==", "!=") and _is_null(node.left):
            return (lambda c: fr(c) is None) if op == "==" else (lambda c: fr(c) is not None)
        return self.comparison(op, fl, fr, self.type_of(node.left), self.type_of(node.right), node.span)

    def comparison(self, op: str, fl: Fn, fr: Fn, left: str, right: str, span=None) -> Fn:
        same_scalar = left == right and left in types.SCALARS
        if op in ("==", "!="):
            if same_scalar:
                return (lambda c: fl(c) == fr(c)) if op == "==" else (lambda c: fl(c) != fr(c))
            equal = runtime.equal
            if op == "==":
                return lambda c: equal(_spent(c, fl(c), span), fr(c))
            return lambda c: not equal(_spent(c, fl(c), span), fr(c))
        compare = _ORDER[op]
        if same_scalar:
            return lambda c: (a := fl(c)) is not None and (b := fr(c)) is not None and compare(a, b)
        ordered = runtime.ordered
        return lambda c: ordered(a := fl(c), b := fr(c)) and compare(a, b)

    def expr_Cond(self, node: ast.Cond) -> Fn:
        ft, fa, fb = self.expr(node.test), self.expr(node.then), self.expr(node.orelse)
        return lambda c: fa(c) if ft(c) is True else fb(c)

    def expr_Aggregate(self, node: ast.Aggregate) -> Fn:
        elem = self.expr(node.elem)
        cond = self.expr(node.cond) if node.cond is not None else None
        slot, span = self.checked.slots[id(node)], node.span
        bool_elem = self.type_of(node.elem) == "bool"
        source = self.indexed(node, slot)
        if source is None:
            items = self.expr(node.iterable)
            source = lambda c: _elements(c, items, span)  # noqa: E731 - a closure like the indexed source
        return _AGGREGATES[node.func](source, elem, cond, slot, span, bool_elem)

    # --- the index of session.allocations / session.evictions ---------------------------------------

    def indexed(self, node: ast.Aggregate, slot: int) -> Fn | None:
        """The elements of an aggregate over ``session.allocations`` (or ``evictions``) whose
        condition is a conjunction with ``a.node == x`` (or ``job``, ``queue``), read from the
        index: only the bucket of ``x`` (with several such conjuncts, the smallest of their
        buckets, narrowed by the others' keys). None when the aggregate is not of that shape.

        The results are those of the plain loop, errors included: the conjuncts evaluated before
        the indexed ones (in ``and`` order) must be ones that cannot fail or spend work (plain
        comparisons of fields and literals), and ``x`` is such a path that does not read the loop
        variable, so an element outside a bucket would only have made the condition false; the
        whole list's size is charged to the work budget as the loop would charge it; the bucket
        keeps the list's order; and each element of the bucket is tested with the whole condition.
        """
        iterable = node.iterable
        if not (isinstance(iterable, ast.FieldAccess) and iterable.name in ("allocations", "evictions")
                and self.type_of(iterable.obj) == "session" and node.cond is not None):
            return None
        keys = []  # every indexable conjunct before the first one that is not safe
        for conjunct in _conjuncts(node.cond):
            key = self.index_key(conjunct, slot)
            if key is not None:
                keys.append(key)
            elif not self.safe(conjunct, slot):
                break
        if not keys:
            return None
        session, name, span = self.expr(iterable.obj), iterable.name, node.span
        if len(keys) == 1:
            [(field, key_node)] = keys
            key_fn = self.expr(key_node)
            return lambda c: _bucket(c, session(c).placements(name), ((field, key_fn(c)),), span)
        fns = [(field, self.expr(key_node)) for field, key_node in keys]
        return lambda c: _bucket(c, session(c).placements(name), [(f, k(c)) for f, k in fns], span)

    def index_key(self, node, slot: int) -> tuple[str, object] | None:
        """(field, key expression) when ``node`` is ``v.field == key`` or ``key == v.field`` with
        ``v`` the loop variable, ``field`` indexed, both sides strings and ``key`` a safe path."""
        if not (isinstance(node, ast.Binary) and node.op == "=="):
            return None
        for mine, other in ((node.left, node.right), (node.right, node.left)):
            if (isinstance(mine, ast.FieldAccess) and mine.name in INDEXED and self.is_var(mine.obj, slot)
                    and self.type_of(mine) == "string" and self.type_of(other) == "string"
                    and self.path(other, slot)):
                return mine.name, other
        return None

    def is_var(self, node, slot: int) -> bool:
        return isinstance(node, ast.Name) and self.checked.names.get(id(node)) == ("var", slot)

    def path(self, node, slot: int) -> bool:
        """A value that cannot fail, spends no work and does not read the loop variable: literals,
        names (a let whose expression is such a path), fields, literal keys, ``??``."""
        if isinstance(node, ast.Literal):
            return True
        if isinstance(node, ast.Name):
            what, target = self.checked.names.get(id(node), (None, None))
            if what == "var":
                return target != slot
            if what == "let":
                return self.path(target.expr, slot)
            if what == "short":
                return self.path(target, slot)
            return what == "root"
        if isinstance(node, ast.FieldAccess):
            return self.path(node.obj, slot)
        if isinstance(node, ast.Index):
            return isinstance(node.key, ast.Literal) and self.path(node.obj, slot)
        if isinstance(node, ast.Binary) and node.op == "??":
            return self.path(node.left, slot) and self.path(node.right, slot)
        return False

    def safe(self, node, slot: int) -> bool:
        """A condition that cannot fail or spend work, whatever the element: ``not``, ``and``,
        ``or`` of comparisons of fields and literals (equality between operands of one scalar
        type; ordering always, it never charges work). It may read the loop variable."""
        if isinstance(node, ast.Literal):
            return True
        if isinstance(node, ast.Unary) and node.op == "not":
            return self.safe(node.operand, slot)
        if not isinstance(node, ast.Binary):
            return False
        if node.op in ("and", "or"):
            return self.safe(node.left, slot) and self.safe(node.right, slot)
        operands = self.readable(node.left, slot) and self.readable(node.right, slot)
        if node.op in _ORDER:
            return operands
        left, right = self.type_of(node.left), self.type_of(node.right)
        return node.op in ("==", "!=") and operands and left == right and left in types.SCALARS

    def readable(self, node, slot: int) -> bool:
        """A path (``path``) that may also read the loop variable."""
        if self.is_var(node, slot):
            return True
        if isinstance(node, ast.FieldAccess):
            return self.readable(node.obj, slot)
        if isinstance(node, ast.Index):
            return isinstance(node.key, ast.Literal) and self.readable(node.obj, slot)
        if isinstance(node, ast.Binary) and node.op == "??":
            return self.readable(node.left, slot) and self.readable(node.right, slot)
        return self.path(node, slot)


# --- closure builders (module functions so the closures capture only what they need) -------------

def _spent(c: Context, value, span):
    """``value``, after charging what visiting it costs to this evaluation's work budget.

    One aggregate is bounded by MAX_ITERATIONS, but nested aggregates, or list operations inside
    one, multiply: the budget bounds the whole call (E512), and its deadline the time (E513), so
    no policy can hold a worker.
    """
    kind = type(value)
    if kind is str:
        if len(value) >= 64:  # runtime.cost, inline: a shorter string costs 0, nothing to charge
            _charge(c, len(value) >> 6, span)
    elif kind is list or kind is dict:
        _charge(c, len(value), span)
    return value


def _charge(c: Context, cost: int, span) -> None:
    """``cost`` off the call's budget (``lang.budget``: one per call, shared by its evaluations)."""
    b = c.budget
    if b is None:
        b = c.budget = current_budget()
    b.left -= cost
    if b.left < b.look_at:  # nothing left, or time to look at the clock
        b.look(span)


def _elements(c: Context, items: Fn, span) -> list:
    """The elements an aggregate visits (bounded), charged to the work budget."""
    values = runtime.iterable(items(c), span)
    return _spent(c, values, span) if values else values


def _bucket(c: Context, placements, keys, span) -> list:
    """The elements of an indexed aggregate: the smallest bucket of ``keys`` ((field, value)
    pairs), after the bound and the charge the whole list would have met (``_elements``), so
    indexing never changes an error."""
    size = placements.size
    runtime.bounded(size, span)
    if size:
        _charge(c, size, span)
    if len(keys) == 1:
        return placements.bucket(*keys[0])
    buckets = sorted(((placements.bucket(field, key), field, key) for field, key in keys), key=_first_len)
    best = buckets[0][0]
    for _, field, key in buckets[1:]:  # the other keys, as the bucket lookup compares them
        if not best:
            break
        best = [v for v in best if getattr(v, field) == key] if key is None or type(key) is str else []
    return best


def _first_len(item) -> int:
    return len(item[0])


def _conjuncts(node) -> list:
    """The operands of a chain of ``and``, in the order they are evaluated."""
    if isinstance(node, ast.Binary) and node.op == "and":
        return [*_conjuncts(node.left), *_conjuncts(node.right)]
    return [node]


def _is_null(node) -> bool:
    return isinstance(node, ast.Literal) and node.value is None


def _null_test(f: Fn, want_null: bool, span) -> Fn:
    """``x == null`` / ``x != null`` (the usual ``when`` guard): what ``runtime.equal`` answers
    with the left operand charged by ``_spent``, without the generic comparison. A null or a
    value ``_spent`` charges nothing for (not a string of 64 characters or more, a list or a
    map) skips the call: the guard of most rules, on every call."""
    def test(c):
        v = f(c)
        if v is None:
            return want_null
        kind = type(v)
        if kind is list or kind is dict or (kind is str and len(v) >= 64):
            _spent(c, v, span)
        return not want_null
    return test


#: operators whose compiled closures answer True or False only (never None or another value)
_BOOL_OPERATORS = frozenset({"and", "or", "==", "!=", "<", "<=", ">", ">=", "in", "not in"})


def _bool_valued(node) -> bool:
    """``node`` compiles to a closure that returns True or False only: a comparison, ``and``,
    ``or``, ``not`` (each ends in ``is``, ``==`` of scalars, an ordering or ``runtime.equal``)."""
    if isinstance(node, ast.Binary):
        return node.op in _BOOL_OPERATORS
    if isinstance(node, ast.Unary):
        return node.op == "not"
    return isinstance(node, ast.Literal) and type(node.value) is bool


def _all_true(fns: list[Fn]) -> Fn:
    if len(fns) == 1:
        only = fns[0]
        return lambda c: only(c) is True
    return lambda c: all(f(c) is True for f in fns)


def _attribute(obj: Fn, get) -> Fn:
    return lambda c: None if (o := obj(c)) is None else get(o)


def _map_get(obj: Fn, key: str) -> Fn:
    return lambda c: o.get(key) if isinstance(o := obj(c), dict) else None


def _any_get(obj: Fn, key: str) -> Fn:
    return lambda c: o.get(key) if isinstance(o := obj(c), dict) else None


def _index(obj: Fn, key: Fn) -> Fn:
    def index(c):
        o, k = obj(c), key(c)
        if o is None or k is None:
            return None
        if isinstance(o, list):
            if type(k) in (int, float) and k == int(k) and 0 <= k < len(o):
                return o[int(k)]
            return None
        if isinstance(k, str):
            return o.get(k) if isinstance(o, dict) else (o[k] if hasattr(o, "__getitem__") else None)
        return None
    return index


def _call(impl, args: list[Fn], nulls: bool, span) -> Fn:
    def call(c):
        values = [_spent(c, a(c), span) for a in args]
        if not nulls and any(v is None for v in values):
            return None
        try:
            result = impl(*values)
        except _CAUGHT:
            return None
        if runtime.is_number(result):
            return runtime.number(result, span)
        if isinstance(result, (str, list)):
            return runtime.sized(result, span)
        return result
    return call


def _arithmetic(op: str, fl: Fn, fr: Fn, span) -> Fn:
    number, sized, is_number = runtime.number, runtime.sized, runtime.is_number

    def arithmetic(c):
        a = fl(c)
        if a is None:
            return None
        b = fr(c)
        if b is None:
            return None
        if is_number(a) and is_number(b):
            if op == "+":
                return number(a + b, span)
            if op == "-":
                return number(a - b, span)
            if op == "*":
                return number(a * b, span)
            if b == 0:
                return None
            return number(a / b if op == "/" else a % b, span)
        if op == "+" and type(a) is type(b) and isinstance(a, (str, list)):
            return _spent(c, sized(a + b, span), span)
        return None
    return arithmetic


def _sum(source, elem, cond, slot, span, bool_elem) -> Fn:
    def total(c):
        vars_, result = c.vars, 0
        for x in source(c):
            vars_[slot] = x
            if cond is None or cond(c) is True:
                v = elem(c)
                if runtime.is_number(v):
                    result += v
        return runtime.number(result, span)
    return total


def _count(source, elem, cond, slot, span, bool_elem) -> Fn:
    def count(c):
        vars_, result = c.vars, 0
        for x in source(c):
            vars_[slot] = x
            if cond is None or cond(c) is True:
                v = elem(c)
                result += (v is True) if bool_elem else (v is not None)
        return result
    return count


def _any(source, elem, cond, slot, span, bool_elem) -> Fn:
    def any_(c):
        vars_ = c.vars
        for x in source(c):
            vars_[slot] = x
            if (cond is None or cond(c) is True) and elem(c) is True:
                return True
        return False
    return any_


def _all(source, elem, cond, slot, span, bool_elem) -> Fn:
    def all_(c):
        vars_ = c.vars
        for x in source(c):
            vars_[slot] = x
            if (cond is None or cond(c) is True) and elem(c) is not True:
                return False
        return True
    return all_


def _extreme(pick):
    def build(source, elem, cond, slot, span, bool_elem) -> Fn:
        def extreme(c):
            vars_, best = c.vars, None
            for x in source(c):
                vars_[slot] = x
                if cond is None or cond(c) is True:
                    v = elem(c)
                    if runtime.is_number(v):
                        best = v if best is None else pick(best, v)
            return best
        return extreme
    return build


_AGGREGATES = {"sum": _sum, "count": _count, "any": _any, "all": _all, "min": _extreme(min), "max": _extreme(max)}
