"""check: resolve every name, type every expression, validate rule structure; collect ALL errors.

The result (``Checked``) is what the compiler needs: the rules with their guards and modifiers,
the type of every expression node, what every ``Name`` refers to, the aggregate variable slots,
and what each root object type is read for (``reads``: chains of (type, field) steps, which
the wire layer turns into the Go key paths its pruned decoders keep, ``wire.paths.go_reads``).
"""

from __future__ import annotations

import difflib
import functools
import re
from dataclasses import dataclass, field
from typing import NamedTuple

from policy_extender import schema
from policy_extender.errors import Diagnostic, PolicyError, Span
from policy_extender.lang import ast, codes, types
from policy_extender.lang.builtins import BUILTINS, RefusedLiteral
from policy_extender.lang.parser import Locator, parse_expression
from policy_extender.lang.values import Setting

ALL_ROOTS = {name: t for roots in schema.DECISION_ROOTS.values() for name, t in roots.items()}
WIRE_ROOTS = ("task", "node", "job", "queue")
#: Roots whose reads are recorded like the wire roots': ``cluster`` reads the onSessionOpen body
#: (its reads decide what the session snapshot keeps: no node unless one is read); ``allocation``
#: the allocate events' tasks (what their records keep: ``wire.paths.placed_paths``)
READ_ROOTS = (*WIRE_ROOTS, "cluster", "allocation")
BOOL_KINDS = frozenset(schema.DECISION_ROOTS) - {"score"}
MODIFIER_KINDS = {
    "when": frozenset(schema.DECISION_ROOTS),
    "reason": BOOL_KINDS,
    "unresolvable": frozenset({"filter"}),
    "weight": frozenset({"score"}),
    "normalize": frozenset({"score"}),
    "permit": frozenset({"enqueue"}),
    "if none": frozenset({"victim", "preemptable", "reclaimable"}),
    "audit": frozenset(schema.DECISION_ROOTS),
}
_STRING_MAPS = ("labels", "annotations", "node_selector", "conditions")
#: Roots whose object comes from the session snapshot, not from the request body, by rule kind
#: (a filter's ``job`` is its task's job looked up in the snapshot; an enqueue's is the body's).
_SNAPSHOT_ROOTS = {"filter": ("job", "queue"), "score": ("job", "queue"), "enqueue": ("queue",),
                   "ready": ("queue",)}


def _protocols_of(statement: ast.Protocol | None) -> frozenset[str]:
    """The schedulers a file's rules serve: its ``protocol`` statement's known names."""
    if statement is None:
        return schema.DEFAULT_PROTOCOLS
    return frozenset(n for n in statement.names if n in schema.PROTOCOL_KINDS) or schema.DEFAULT_PROTOCOLS


class Typed(NamedTuple):
    type: str
    origin: tuple[str, tuple] | None = None  # (wire root, chain of (type, field) steps to this value)


@dataclass
class CheckedRule:
    rule: ast.RuleStatement
    name: str
    kind: str
    file: str
    guards: list  # expressions that must all be true for the rule to apply (file guard first)
    reason: ast.Template | None = None
    unresolvable: bool = False
    weight: float = 1
    normalize: tuple[float, float] | None = None
    permit: bool = False
    abstain_if_none: bool = False  # `if none abstain`: refusing every evictee answers Abstain
    audit: bool = False  # a shadow rule: evaluated and counted, never changes an answer
    #: the schedulers the rule serves: its file's ``protocol`` statement (``schema.DEFAULT_PROTOCOLS``)
    protocols: frozenset[str] = schema.DEFAULT_PROTOCOLS


@dataclass
class Checked:
    rules: list[CheckedRule]
    types: dict[int, str]
    names: dict[int, tuple]  # id(Name) -> ("root", name) | ("let", Let) | ("short", Expr) | ("var", slot)
    slots: dict[int, int]    # id(Aggregate) -> variable slot
    prepared: dict[int, object]  # id(literal argument) -> prepared value (compiled regex)
    reads: dict[str, frozenset]
    sources: dict[str, str]
    #: rule kinds with a rule that reads the session: ``session.*`` (but ``session.open``), or a
    #: job or queue the snapshot supplies (``task.job``, ``job.queue``, filter/score ``job``...)
    session_kinds: frozenset = frozenset()
    #: what is worth saying about a set that loads (severity "warning"): a ``let`` no rule reads
    warnings: tuple = ()


@dataclass
class Scope:
    kind: str | None              # rule kind, None when checking a let or guard on its own
    lets: dict[str, ast.Let]
    vars: dict[str, tuple[Typed, int]] = field(default_factory=dict)
    shorthand: str | None = None  # the shorthand being expanded, for messages
    #: the schedulers the file's rules serve (its ``protocol`` statement)
    protocols: frozenset[str] = schema.DEFAULT_PROTOCOLS

    def with_var(self, name: str, typed: Typed, slot: int) -> "Scope":
        return Scope(self.kind, self.lets, {**self.vars, name: (typed, slot)}, self.shorthand, self.protocols)


def check(files: list[ast.PolicyFile], settings: list[Setting] | tuple = ()) -> Checked:
    """Check a whole policy set (``settings``: its values file's, ``lang.values``); raises
    ``PolicyError`` with every problem found."""
    return Checker(files, settings).run()


class Checker:
    def __init__(self, files: list[ast.PolicyFile], settings: list[Setting] | tuple = ()):
        self.files = files
        self.settings = settings
        #: the ``shared let`` s of every file, by name (the first of a name)
        self.shared: dict[str, ast.Let] = {}
        #: file -> {param name: the let that stands for it, its value set (lang.values)}
        self.params: dict[str, dict[str, ast.Let]] = {}
        self.param_lets: set[int] = set()  # id(Let) of those lets
        #: (id(shared Let), rule kind): the shared let reads a name that kind does not have
        self.unavailable_shared: set[tuple] = set()
        self.sources = {f.name: f.source for f in files}
        self.diagnostics: dict[tuple, Diagnostic] = {}
        self.types: dict[int, str] = {}
        self.names: dict[int, tuple] = {}
        self.slots: dict[int, int] = {}
        self.prepared: dict[int, object] = {}
        #: root -> {(chain of (type, field) steps, whole value)}
        self.reads: dict[str, set] = {r: set() for r in READ_ROOTS}
        self.rule_names: dict[str, Span] = {}
        self.let_types: dict[tuple, Typed] = {}
        self.session_kinds: set[str] = set()
        self.used_lets: set[int] = set()  # id(Let) of the lets a rule reads, directly or through a let
        #: file name -> the line of its ``protocol`` statement (for messages)
        self.protocol_lines: dict[str, int] = {}

    def run(self) -> Checked:
        self.check_shared()
        self.check_params()
        rules = [r for f in self.files for r in self.check_file(f)]
        if self.diagnostics:
            raise PolicyError(list(self.diagnostics.values()), self.sources)
        reads = {k: frozenset(v) for k, v in self.reads.items()}
        return Checked(rules, self.types, self.names, self.slots, self.prepared, reads, self.sources,
                       frozenset(self.session_kinds), warnings=tuple(self.unused_lets()))

    def unused_lets(self) -> list[Diagnostic]:
        """A warning for each ``let`` that no rule reads (a let read only by unused lets included)."""
        found = []
        for file in self.files:
            for let in file.statements:
                if isinstance(let, ast.Let) and id(let) not in self.used_lets:
                    line = self.sources[file.name].split("\n")[let.span.line - 1]
                    named = re.match(r"let[ \t]+", line[let.span.column - 1:])
                    column = let.span.column + (named.end() if named else 0)
                    found.append(Diagnostic(codes.W201, f"let '{let.name}' is never used",
                                            Span(file.name, let.span.line, column, let.span.line, column + len(let.name)),
                                            "use it in a rule or remove it; `check --strict` makes warnings errors",
                                            severity="warning"))
        return found

    def error(self, code: str, message: str, span: Span, hint: str | None = None) -> Typed:
        self.diagnostics.setdefault((code, span, message), Diagnostic(code, message, span, hint))
        return Typed("any")

    # --- shared definitions and parameters (docs/language.md) -----------------------------------

    def check_shared(self) -> None:
        """The ``shared let`` s of every file: one of each name in the whole set, each checked
        against the shared lets above it in its own file (a shared let reads no file's lets)."""
        for file in self.files:
            for let in file.statements:
                if not (isinstance(let, ast.Let) and let.shared):
                    continue
                first = self.shared.get(let.name)
                if first is not None:
                    for here, there in ((let, first), (first, let)):
                        self.error(codes.E208, f"shared let '{let.name}' is also defined at {there.span}", here.span,
                                   "a shared name means one thing in the whole set: rename or remove one")
                    continue
                if let.name in ALL_ROOTS or let.name in schema.SHORTHANDS:
                    what = "context root" if let.name in ALL_ROOTS else "shorthand"
                    self.error(codes.E204, f"let '{let.name}' would hide the {what} '{let.name}'", let.span,
                               "give the binding another name")
                self.shared[let.name] = let
        for let in self.shared.values():
            if let.expr is not None:
                self.expr(let.expr, Scope(None, self.lets_before(self.shared, let)))

    def hides_shared(self, name: str, span: Span) -> bool:
        """A file's own let or param named like a shared let: reported (E208)."""
        shared = self.shared.get(name)
        if shared is None:
            return False
        self.error(codes.E208, f"'{name}' would hide the shared let '{name}' of {shared.span}", span,
                   "give this one another name, or use the shared one")
        return True

    def shared_unavailable_here(self, node: ast.Name, let: ast.Let, scope: Scope) -> None:
        """E401 at a rule's use of a shared let that reads what the rule's kind does not have
        (reported at the read too, in the shared let's file)."""
        roots = ", ".join(schema.DECISION_ROOTS[scope.kind])  # type: ignore[index]  # a rule's scope: kind is set
        self.error(codes.E401, f"shared let '{let.name}' ({let.span}) reads a name that is not available in "
                   f"{_a(scope.kind)} rule", node.span, f"{scope.kind} rules can read {roots}")  # type: ignore[arg-type]  # as above

    def lets_before(self, lets: dict[str, ast.Let], let: ast.Let) -> dict[str, ast.Let]:
        """What ``let`` 's expression may read: a shared let, the shared lets above it in its file;
        a file's let, the lets above it, its file's params and every shared let."""
        if let.shared:
            return {n: other for n, other in self.shared.items()
                    if other.span.file == let.span.file and other.span.line < let.span.line}
        return {n: other for n, other in lets.items()
                if other.shared or id(other) in self.param_lets or other.span.line < let.span.line}

    def check_params(self) -> None:
        """Each file's ``param`` s (type, default, name), then the values file's settings; every
        param becomes a let of its file bound to its value (the default, or the values file's)."""
        declared: dict[str, dict[str, ast.Param]] = {}
        for file in self.files:
            params = declared.setdefault(file.name, {})
            for param in (s for s in file.statements if isinstance(s, ast.Param)):
                if not self.bad_param(param, params):
                    params[param.name] = param
                elif param.name not in (*params, *self.shared, *ALL_ROOTS, *schema.SHORTHANDS):
                    # a param whose default is wrong: its uses read 'any', not 'unknown name'
                    self.params.setdefault(file.name, {})[param.name] = ast.Let(param.name, None, param.span)  # type: ignore[arg-type]  # never compiled: an error
        values = {name: {p: param.default for p, param in params.items()} for name, params in declared.items()}
        stems = {_stem(name): name for name in declared}
        for setting in self.settings:
            self.apply_setting(setting, declared, values, stems)
        for name, params in declared.items():
            lets = self.params.setdefault(name, {})  # (holding the bad params' stand-ins already)
            for param_name, param in params.items():
                let = ast.Let(param_name, ast.Literal(values[name][param_name], param.default_span), param.span)
                lets[param_name] = let
                self.param_lets.add(id(let))

    def bad_param(self, param: ast.Param, params: dict[str, ast.Param]) -> bool:
        """A param declared twice, hiding a name, or whose default is not of its type: reported."""
        if param.name in params:
            self.error(codes.E206, f"parameter '{param.name}' is already declared at line "
                       f"{params[param.name].span.line}", param.name_span, "remove one")
            return True
        if param.name in ALL_ROOTS or param.name in schema.SHORTHANDS:
            what = "context root" if param.name in ALL_ROOTS else "shorthand"
            self.error(codes.E206, f"param '{param.name}' would hide the {what} '{param.name}'", param.name_span,
                       "give the parameter another name")
            return True
        if self.hides_shared(param.name, param.name_span):
            return True
        if not _param_fits(param.type, param.default):
            self.error(codes.E206, f"the default of '{param.name}' is {_describe_value(param.default)}, "
                       f"not {types.describe(param.type)}", param.default_span,
                       f"write {_example(param.type)}, or declare another type")
            return True
        return False

    def apply_setting(self, setting: Setting, declared, values, stems: dict[str, str]) -> None:
        """One key of the values file: the param it sets, type-checked (E001, E207, E310)."""
        stem = max((s for s in stems if setting.key.startswith(s + ".")), key=len, default=None)
        if stem is None:
            policy = setting.key.split(".", 1)[0]
            self.error(codes.E001, f"'{setting.key}': no policy file '{policy}.policy' in the set"
                       f"{_did_you_mean(policy, stems)}", setting.key_span,
                       "a key starts with the name of a policy file of the set, without .policy")
            return
        file = stems[stem]
        params, rest = declared[file], setting.key[len(stem) + 1:]
        name, _, key = rest.partition(".") if rest not in params else (rest, "", "")
        param = params.get(name)
        if param is None:
            declares = ", ".join(f"{p.name} ({p.name_span})" for p in params.values()) or "nothing"
            self.error(codes.E207, f"{file} declares no parameter '{rest}'{_did_you_mean(rest, params)}",
                       setting.key_span, f"{file} declares: {declares}")
            return
        wanted = types.element(param.type) if key else param.type
        if param.type == "map[number]" and not key:
            self.error(codes.E310, f"'{setting.key}' is a map[number] (declared at {param.name_span}): set one "
                       "key of it", setting.value_span, f"write {setting.key}.nvidia.com/gpu: 2")
        elif key and not types.is_map(param.type):
            self.error(codes.E310, f"'{stem}.{name}' is {types.describe(param.type)} (declared at "
                       f"{param.name_span}), not a map: '.{key}' names nothing", setting.key_span,
                       f"write {stem}.{name}: {_example(param.type)}")
        elif not _param_fits(wanted, setting.value):  # type: ignore[arg-type]  # a map type has an element
            self.error(codes.E310, f"'{setting.key}' is {types.describe(wanted)} (declared at {param.name_span}), "  # type: ignore[arg-type]  # as above
                       f"this is {_describe_value(setting.value)}", setting.value_span,
                       f"write {_example(wanted)}")  # type: ignore[arg-type]  # as above
        elif key:
            values[file][name] = {**values[file][name], key: setting.value}
        else:
            values[file][name] = setting.value

    def constant(self, value, scope: Scope, modifier: str):
        """The number a ``weight`` / ``normalize`` bound stands for: a literal, a number param of
        the file, or a shared let of a number literal; None (reported, E311) otherwise."""
        if not isinstance(value, ast.Name):
            return value
        let = scope.lets.get(value.name)
        literal = let.expr if let is not None else None
        if isinstance(literal, ast.Literal) and _param_fits("number", literal.value):
            self.used_lets.add(id(let))
            return literal.value
        params = [n for n, other in scope.lets.items() if id(other) in self.param_lets
                  and isinstance(other.expr, ast.Literal) and _param_fits("number", other.expr.value)]
        self.error(codes.E311, f"'{modifier}' takes a number: '{value.name}' is not a number parameter of this "
                   f"file or a shared let of a number{_did_you_mean(value.name, params)}", value.span,
                   f"declare it, e.g. `param {value.name}: number = 1`, or write the number")
        return None

    # --- statements ------------------------------------------------------------------------------

    def check_file(self, file: ast.PolicyFile) -> list[CheckedRule]:
        lets: dict[str, ast.Let] = {**self.shared, **self.params.get(file.name, {})}
        guard: ast.Guard | None = None
        audit: ast.Audit | None = None
        protocol: ast.Protocol | None = None
        rules: list[CheckedRule] = []
        for statement in file.statements:
            if isinstance(statement, ast.Param) or (isinstance(statement, ast.Let) and statement.shared):
                continue  # checked for the whole set first (check_shared, check_params)
            if isinstance(statement, ast.Let):
                self.check_let(statement, lets)
            elif isinstance(statement, ast.Guard):
                guard = self.check_guard(statement, guard, rules, lets)
            elif isinstance(statement, ast.Audit):
                audit = self.check_audit(statement, audit, rules)
            elif isinstance(statement, ast.Protocol):
                protocol = self.check_protocol(statement, protocol, rules)
                self.protocol_lines.setdefault(file.name, protocol.span.line)
            else:
                rules.append(self.check_rule(file, statement, guard, dict(lets), audit, protocol))
        return rules

    def check_protocol(self, statement: ast.Protocol, previous: ast.Protocol | None, rules) -> ast.Protocol:
        """The file-level ``protocol`` statement: once, before the first rule, each name known and
        given once."""
        if previous is not None:
            self.error(codes.E409, f"the file already says which schedulers it serves at line {previous.span.line}",
                       statement.span, "list every scheduler on that one line, e.g. `protocol volcano, kube-scheduler`")
            return previous
        if rules:
            self.error(codes.E409, "'protocol' says which schedulers the file's rules serve and must come before "
                       "the first rule", statement.span, "move it to the top of the file")
        seen: set[str] = set()
        for name, span in zip(statement.names, statement.name_spans):
            if name not in schema.PROTOCOL_KINDS:
                close = difflib.get_close_matches(name, list(schema.PROTOCOL_KINDS), n=1)
                known = " or ".join(f"'{p}'" for p in schema.PROTOCOL_KINDS)
                self.error(codes.E409, f"unknown scheduler '{name}': a policy file serves {known}", span,
                           f"did you mean '{close[0]}'?" if close else f"write {known}")
            elif name in seen:
                self.error(codes.E409, f"'{name}' is named twice", span, "remove one")
            seen.add(name)
        return statement

    def check_audit(self, marker: ast.Audit, previous, rules) -> ast.Audit:
        """The file-level ``audit`` marker: once, before the first rule."""
        if previous is not None:
            self.error(codes.E408, f"the file is already marked audit at line {previous.span.line}",
                       marker.span, "remove this line")
            return previous
        if rules:
            self.error(codes.E408, "'audit' alone on a line marks the whole file and must come before "
                       "the first rule", marker.span,
                       "move it to the top of the file, or indent it under one rule to audit only that rule")
        return marker

    def check_let(self, let: ast.Let, lets: dict[str, ast.Let]) -> None:
        if self.hides_shared(let.name, let.span):
            pass
        elif let.name in lets:
            self.error(codes.E204, f"'{let.name}' is already defined at line {lets[let.name].span.line}", let.span,
                       "give the binding another name")
        elif let.name in ALL_ROOTS or let.name in schema.SHORTHANDS:
            what = "context root" if let.name in ALL_ROOTS else "shorthand"
            self.error(codes.E204, f"let '{let.name}' would hide the {what} '{let.name}'", let.span,
                       "give the binding another name")
        if let.expr is not None:  # None: the let did not parse (its syntax error is reported)
            self.expr(let.expr, Scope(None, dict(lets)))
        lets[let.name] = let

    def check_guard(self, guard, previous, rules, lets) -> ast.Guard:
        if previous is not None:
            self.error(codes.E405, f"a file has one guard; this file already has one at line {previous.span.line}",
                       guard.span, "combine the conditions with 'and'")
        elif rules:
            self.error(codes.E405, "the file guard must come before the first rule", guard.span,
                       "move the 'when' line to the top of the file")
        self.condition(guard.expr, Scope(None, dict(lets)), "the file guard")
        return guard

    def check_rule(self, file, rule: ast.RuleStatement, guard, lets, audit: ast.Audit | None = None,
                   protocol: ast.Protocol | None = None) -> CheckedRule:
        name = rule.name or f"{file.name}:{rule.span.line}"
        self.check_rule_name(name, rule)
        protocols = _protocols_of(protocol)
        self.check_rule_protocols(rule, protocol, protocols)
        checked = CheckedRule(rule, name, rule.kind, file.name, [], audit=audit is not None, protocols=protocols)
        for modifier in rule.modifiers:
            if modifier.kind == "audit" and audit is not None:
                self.error(codes.E408, f"the whole file is marked audit (line {audit.span.line}): this "
                           "'audit' changes nothing", modifier.span, "remove it")
        # what the rule (its guards, lets and shorthands too) reads must be sent by every scheduler
        # the rule serves (a kind one has no verb for is E410 above, not a read error per read)
        scope = Scope(rule.kind, lets, protocols=frozenset(p for p in protocols if rule.kind in schema.PROTOCOL_KINDS[p]))
        if guard is not None:
            self.condition(guard.expr, scope, "the file guard")
            checked.guards.append(guard.expr)
        self.check_result(rule, scope)
        seen: dict[str, ast.Modifier] = {}
        for modifier in rule.modifiers:
            self.check_modifier(modifier, checked, scope, seen)
        return checked

    def check_rule_protocols(self, rule: ast.RuleStatement, protocol: ast.Protocol | None,
                             protocols: frozenset[str]) -> None:
        """Every scheduler the file serves has a verb for the rule's kind."""
        for name in sorted(protocols):
            if rule.kind not in schema.PROTOCOL_KINDS[name]:
                *others, last = sorted(schema.PROTOCOL_KINDS[name])
                served = f"{', '.join(others)} and {last}"
                line = protocol.span.line if protocol is not None else 0
                kind_span = Span(rule.span.file, rule.span.line, rule.span.column, rule.span.line,
                                 rule.span.column + len(rule.kind))
                self.error(codes.E410, f"{name} has no verb for {rule.kind} rules (this file serves {name}: "
                           f"'protocol' at line {line}); it serves only {served} rules", kind_span,
                           "move the rule to a file that serves only volcano")

    def check_rule_name(self, name: str, rule: ast.RuleStatement) -> None:
        if name in self.rule_names:
            first = self.rule_names[name]
            self.error(codes.E402, f"rule name '{name}' is already used at {first.file}:{first.line}",
                       rule.name_span, "rule names are unique across all policy files")
        else:
            self.rule_names[name] = rule.name_span

    def check_result(self, rule: ast.RuleStatement, scope: Scope) -> None:
        typed = self.expr(rule.expr, scope)
        wanted = "number" if rule.kind == "score" else "bool"
        if not types.loose(typed.type) and typed.type != wanted:
            self.error(codes.E305, f"a {rule.kind} rule needs {types.describe(wanted)}, this is {types.describe(typed.type)}",
                       rule.expr.span, _result_hint(rule.kind))

    def check_modifier(self, modifier: ast.Modifier, checked: CheckedRule, scope: Scope, seen: dict) -> None:
        kind = modifier.kind
        if checked.kind not in MODIFIER_KINDS[kind]:
            allowed = ", ".join(sorted(MODIFIER_KINDS[kind]))
            self.error(codes.E403, f"'{kind}' does not apply to a {checked.kind} rule", modifier.span,
                       f"'{kind}' is for {allowed} rules")
            return
        if kind in seen:
            self.error(codes.E404, f"'{kind}' is given twice (first at line {seen[kind].span.line})", modifier.span)
            return
        seen[kind] = modifier
        getattr(self, "modifier_" + kind.replace(" ", "_"))(modifier, checked, scope)

    def modifier_when(self, modifier, checked, scope) -> None:
        self.condition(modifier.value, scope, "'when'")
        checked.guards.append(modifier.value)

    def modifier_reason(self, modifier, checked, scope) -> None:
        for part in modifier.value.parts:
            if not isinstance(part, str):
                self.expr(part, scope)
        checked.reason = modifier.value

    def modifier_unresolvable(self, modifier, checked, scope) -> None:
        checked.unresolvable = True

    def modifier_audit(self, modifier, checked, scope) -> None:
        checked.audit = True

    def modifier_permit(self, modifier, checked, scope) -> None:
        checked.permit = True

    def modifier_if_none(self, modifier, checked, scope) -> None:
        checked.abstain_if_none = modifier.value == "abstain"

    def modifier_weight(self, modifier, checked, scope) -> None:
        checked.weight = self.constant(modifier.value, scope, "weight")

    def modifier_normalize(self, modifier, checked, scope) -> None:
        low, high = (self.constant(bound, scope, "normalize") for bound in modifier.value)
        if low is None or high is None:
            return
        if not low < high:
            self.error(codes.E406, f"normalize {low} to {high}: the low end must be below the high end", modifier.span)
        checked.normalize = (low, high)

    def condition(self, expr, scope: Scope, what: str) -> None:
        typed = self.expr(expr, scope)
        if not types.loose(typed.type) and typed.type != "bool":
            self.error(codes.E303, f"{what} needs a bool, this is {types.describe(typed.type)}", expr.span,
                       "compare it, e.g. x != null or x > 0")

    # --- expressions -----------------------------------------------------------------------------

    def expr(self, node, scope: Scope) -> Typed:
        typed = getattr(self, f"expr_{type(node).__name__}")(node, scope)
        self.types[id(node)] = typed.type
        return typed

    def expr_Literal(self, node: ast.Literal, scope) -> Typed:
        value = node.value
        if value is None:
            return Typed("null")
        if isinstance(value, dict):  # a map[number] parameter's value
            return Typed("map[number]")
        if isinstance(value, bool):
            return Typed("bool")
        return Typed("string" if isinstance(value, str) else "number")

    def expr_ListLit(self, node: ast.ListLit, scope) -> Typed:
        element = "null"
        for item in node.items:
            item_type = self.expr(item, scope).type
            joined = types.unify(element, item_type)
            if joined is None:
                self.error(codes.E304, f"list elements have different types: {element} and {item_type}", item.span)
                joined = "any"
            element = joined
        return Typed(f"list[{'any' if element == 'null' else element}]")

    def expr_Name(self, node: ast.Name, scope: Scope) -> Typed:
        name = node.name
        if name in scope.vars:
            typed, slot = scope.vars[name]
            self.names[id(node)] = ("var", slot)
            return typed
        if name in scope.lets:
            return self.use_let(node, scope.lets[name], scope)
        roots = schema.DECISION_ROOTS[scope.kind] if scope.kind else ALL_ROOTS
        if name in roots:
            self.names[id(node)] = ("root", name)
            self.check_sent(node, scope, roots[name], name)
            if scope.kind and name in _SNAPSHOT_ROOTS.get(scope.kind, ()):
                self.session_kinds.add(scope.kind)
            origin = (roots[name], ()) if roots[name] in READ_ROOTS else None
            return Typed(roots[name], origin)
        if name in ALL_ROOTS:
            return self.unavailable(node, scope)
        if name in schema.SHORTHANDS:
            return self.use_shorthand(node, scope)
        candidates = [*scope.vars, *scope.lets, *roots, *_shorthands_of(scope.kind)]
        if name in MODIFIER_KINDS:  # `x and` then an indented `unresolvable`: read as a name
            return self.error(codes.E202, f"unknown name '{name}': '{name}' is a modifier, read here as part of "
                              "the expression", node.span, self.modifier_hint(node.span))
        return self.error(codes.E202, f"unknown name '{name}'{_did_you_mean(name, candidates)}", node.span,
                          _name_hint(scope))

    def modifier_hint(self, span: Span) -> str:
        lines = self.sources.get(span.file, "").split("\n")
        before = lines[span.line - 2] if 2 <= span.line <= len(lines) + 1 else ""
        code = re.sub(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|#.*', " ", before).rstrip()
        op = re.search(r"(?<![A-Za-z0-9_.])(and|or)$", code)
        if op and span.column > 1:
            return (f"'{op.group(1)}' at the end of line {span.line - 1} has nothing after it: finish the "
                    f"condition or remove '{op.group(1)}'")
        return "a modifier goes on its own indented line after the rule's expression"

    def unavailable(self, node: ast.Name, scope: Scope) -> Typed:
        roots = ", ".join(schema.DECISION_ROOTS[scope.kind])  # type: ignore[index]  # a rule's scope: kind is set
        via = f" ('{scope.shorthand}' reads {node.name})" if scope.shorthand else ""
        return self.error(codes.E401, f"'{node.name}' is not available in {_a(scope.kind)} rule{via}", node.span,  # type: ignore[arg-type]  # as above
                          f"{scope.kind} rules can read {roots}")

    def check_sent(self, node, scope: Scope, type_name: str, key: str, field_name: str | None = None) -> None:
        """A read (a root name, or a field: ``key`` is ``type.field``) of what a scheduler the rule
        serves never sends is E411, once per read. A field of an object the scheduler does not send
        at all is not reported again: reaching that object was (``task.job.name``: ``task.job``)."""
        for protocol in sorted(scope.protocols):
            if schema.sends(protocol, type_name, field_name) or \
                    (field_name is not None and not schema.sends(protocol, type_name)):
                continue
            why, instead = schema.PROTOCOL_UNSENT[protocol].get(key, (f"{protocol} does not send it", None))
            written = self.text(node.span)
            what = written if field_name is not None and re.fullmatch(rf"[A-Za-z_]\w*(\.\w+)*\.{field_name}", written) \
                else key
            instead = instead and instead.format(obj=what.rsplit(".", 1)[0])
            via = f" ('{scope.shorthand}' reads {key})" if scope.shorthand else ""
            line = self.protocol_lines.get(node.span.file, 0)
            others = " and ".join(p for p in schema.PROTOCOL_KINDS if p != protocol)
            fix = f"serve this rule to {others} only: move it to a file that does not serve {protocol}"
            self.error(codes.E411, f"{why}: {what} cannot be known{via} (this file serves {protocol}: 'protocol' at "
                       f"line {line})", node.span, f"{instead}, or {fix}" if instead else fix)

    def use_let(self, node: ast.Name, let: ast.Let, scope: Scope) -> Typed:
        self.names[id(node)] = ("let", let)
        if scope.kind is not None:  # read by a rule (a let's own check has no kind)
            self.used_lets.add(id(let))
        if let.expr is None:
            return Typed("any")
        key = (id(let), scope.kind, scope.protocols)
        if key not in self.let_types:
            self.let_types[key] = Typed("any")  # a let cannot refer to itself; guard anyway
            before = len(self.diagnostics)
            self.let_types[key] = self.expr(let.expr, Scope(scope.kind, self.lets_before(scope.lets, let),
                                                            protocols=scope.protocols))
            if let.shared and any(d.code == codes.E401 for d in list(self.diagnostics.values())[before:]):
                self.unavailable_shared.add(key)
        if key in self.unavailable_shared:
            self.shared_unavailable_here(node, let, scope)
        return self.let_types[key]

    def use_shorthand(self, node: ast.Name, scope: Scope) -> Typed:
        expansion = ast.respan(_shorthand(node.name), node.span)
        self.names[id(node)] = ("short", expansion)
        return self.expr(expansion, Scope(scope.kind, {}, {}, node.name, scope.protocols))

    def expr_FieldAccess(self, node: ast.FieldAccess, scope) -> Typed:
        obj = self.expr(node.obj, scope)
        t = obj.type
        if types.is_map(t):
            return Typed(types.element(t))  # type: ignore[arg-type]  # a map type has an element
        if t in schema.TYPES:
            return self.object_field(node, obj, scope)
        if types.loose(t):
            return Typed("any")
        return self.error(codes.E301, f"{types.describe(t)} has no fields (reading '.{node.name}')", node.name_span,
                          self.dotted_key_hint(node))

    def dotted_key_hint(self, node: ast.FieldAccess) -> str | None:
        """``task.annotations.scheduling.example.com/allow``: a map key with dots written after a
        dot; the hint writes the whole key in brackets."""
        key_of = node.obj
        if not isinstance(key_of, ast.FieldAccess) or not types.is_map(self.types.get(id(key_of.obj), "")):
            return None
        span = key_of.name_span
        line = self.sources.get(span.file, "").split("\n")[span.line - 1] if span.file in self.sources else ""
        key = re.match(r"[A-Za-z0-9_./-]+", line[span.column - 1:])
        if key is None:
            return None
        return f'a key with dots is written in brackets: {self.text(key_of.obj.span)}["{key.group()}"]'

    def object_field(self, node: ast.FieldAccess, obj: Typed, scope: Scope) -> Typed:
        f = schema.field(obj.type, node.name)
        if f is None:
            hint = (_counts_hint(node.name) if obj.type == "counts"
                    else _resource_hint(node.name) if obj.type == "resources" else None)
            return self.error(codes.E201, f"unknown field '{node.name}' on {obj.type}"
                              f"{_did_you_mean(node.name, schema.TYPES[obj.type])}", node.name_span, hint)
        self.check_sent(node, scope, obj.type, f"{obj.type}.{f.name}", f.name)
        if f.session and scope.kind and not (obj.type == "session" and f.name == "open"):
            self.session_kinds.add(scope.kind)
        origin = None
        from_obj = _origin(obj)
        if from_obj is not None:
            root, chain = from_obj
            read = chain + ((obj.type, f.name),)
            self.reads[root].add((read, False))
            if f.type in WIRE_ROOTS:
                origin = (f.type, ())
            elif (root == "cluster" or not f.session) and (
                    types.element(f.type) in WIRE_ROOTS or f.type in schema.TYPES):
                origin = (root, read)
        return Typed(f.type, origin)

    def expr_Index(self, node: ast.Index, scope) -> Typed:
        obj = self.expr(node.obj, scope)
        key = self.expr(node.key, scope).type
        t = obj.type
        if types.is_map(t) or t in schema.INDEX_TYPES:
            self.key_type(node, key, "string")
            if t == "counts" and isinstance(node.key, ast.Literal) and isinstance(node.key.value, str):
                problem = _counts_key_problem(node.key.value)
                if problem is not None:
                    return self.error(codes.E201, problem[0], node.key.span, problem[1])
            if t in schema.INDEX_TYPES:
                self.resource_read(node, obj)
                return Typed(schema.INDEX_TYPES[t])
            return Typed(types.element(t))  # type: ignore[arg-type]  # a map type has an element
        if types.is_list(t):
            self.key_type(node, key, "number")
            return Typed(types.element(t), obj.origin)  # type: ignore[arg-type]  # a list type has an element
        if types.loose(t):
            return Typed("any")
        return self.error(codes.E309, f"{types.describe(t)} cannot be indexed with [...]", node.span)

    def key_type(self, node: ast.Index, key: str, wanted: str) -> None:
        if not types.loose(key) and key != wanted:
            self.error(codes.E309, f"the key must be {types.describe(wanted)}, this is {types.describe(key)}", node.key.span)

    def resource_read(self, node: ast.Index, obj: Typed) -> None:
        if obj.origin is None:
            return
        root, chain = obj.origin  # a resources value: its origin is the field's own
        key = node.key.value if isinstance(node.key, ast.Literal) else None
        if not isinstance(key, str):
            self.reads[root].add((chain, True))
            return
        name = next((n for n, full in schema.RESOURCE_SHORTHANDS.items() if key in (n, full)), "ephemeral_storage")
        self.reads[root].add((chain + (("resources", name),), False))

    def expr_Call(self, node: ast.Call, scope) -> Typed:
        arg_types = [self.expr(a, scope).type for a in node.args]
        if node.func == "count" and len(node.args) == 1:
            return self.count_list(node, arg_types[0])
        builtin = BUILTINS.get(node.func)
        if builtin is None:
            return self.error(codes.E203, f"unknown function '{node.func}'{_did_you_mean(node.func, BUILTINS)}",
                              node.func_span, "docs/language.md lists every builtin")
        required = len(builtin.params) - builtin.optional
        if not required <= len(node.args) <= len(builtin.params):
            wanted = f"{required}" if not builtin.optional else f"{required} to {len(builtin.params)}"
            return self.error(codes.E307, f"{node.func}() takes {wanted} argument{'s' if wanted != '1' else ''}, "
                              f"got {len(node.args)}", node.span, builtin.signature())
        self.check_arguments(node, builtin, arg_types)
        return Typed(builtin.result_type(arg_types))

    def count_list(self, node: ast.Call, arg: str) -> Typed:
        if not (types.loose(arg) or types.is_list(arg)):
            self.error(codes.E306, f"count() needs a list, this is {types.describe(arg)}", node.args[0].span,
                       "count(x for x in list if condition) counts matching elements")
        return Typed("number")

    def check_arguments(self, node: ast.Call, builtin, arg_types: list[str]) -> None:
        generic = "null"
        for i, (param, actual, arg) in enumerate(zip(builtin.params, arg_types, node.args)):
            if not types.accepts(param, actual):
                self.error(codes.E306, f"argument {i + 1} of {node.func}() must be {_a_type(param)}, "
                           f"this is {types.describe(actual)}", arg.span, builtin.signature())
            if param == "T":
                joined = types.unify(generic, actual)
                if joined is None:
                    self.error(codes.E306, f"the arguments of {node.func}() must have the same type", node.span)
                generic = joined or generic
            if builtin.literal == i:
                self.prepare_literal(node, builtin, arg)

    def prepare_literal(self, node: ast.Call, builtin, arg) -> None:
        if not isinstance(arg, ast.Literal):
            self.error(codes.E306, f"argument {builtin.literal + 1} of {node.func}() must be a literal", arg.span)
            return
        try:
            self.prepared[id(arg)] = builtin.prepare(arg.value)
        except RefusedLiteral as err:
            self.error(err.code, str(err), arg.span)

    def expr_Unary(self, node: ast.Unary, scope) -> Typed:
        t = self.expr(node.operand, scope).type
        wanted = "number" if node.op == "-" else "bool"
        if not types.loose(t) and t != wanted:
            code = codes.E301 if node.op == "-" else codes.E303
            self.error(code, f"'{node.op}' needs {types.describe(wanted)}, this is {types.describe(t)}", node.operand.span)
        return Typed(wanted)

    def expr_Binary(self, node: ast.Binary, scope) -> Typed:
        if node.op == "-":
            dashed = self.dashed_key(node, scope)
            if dashed is not None:
                return dashed
        if node.op in ast.COMPARISONS:
            quoted = self.unquoted_words(node, scope)
            if quoted is not None:
                return quoted
        left = self.expr(node.left, scope).type
        right = self.expr(node.right, scope).type
        if node.op in ("and", "or"):
            return self.logical(node, left, right)
        if node.op in ast.ARITHMETIC:
            return self.arithmetic(node, left, right)
        if node.op == "??":
            return self.coalesce(node, left, right)
        if node.op in ("in", "not in"):
            return self.membership(node, left, right)
        return self.comparison(node, left, right)

    def dashed_key(self, node: ast.Binary, scope: Scope) -> Typed | None:
        """``task.annotations.allow-any-gpu``: a map key with '-' written after a dot reads as a
        subtraction; reported once, with the bracketed key, and typed as the map's values."""
        parts: list = []
        left: ast.Expr = node
        while isinstance(left, ast.Binary) and left.op == "-":
            parts.insert(0, left.right)
            left = left.left
        text = self.text(node.span)
        if not isinstance(left, ast.FieldAccess) or not re.fullmatch(r"[^\s]*\.[A-Za-z0-9_]+(-[A-Za-z0-9_]+)+", text) \
                or not all(isinstance(p, ast.Name) or (isinstance(p, ast.Literal) and isinstance(p.value, int)
                                                       and not isinstance(p.value, bool)) for p in parts):
            return None
        owner = self.expr(left.obj, scope).type
        if not types.is_map(owner) or (types.element(owner) != "string"
                                       and all(not self.unknown_name(p.name, scope) for p in parts
                                               if isinstance(p, ast.Name))):
            return None
        for part in (left, *parts):  # typed, so that nothing else is reported about them
            self.types[id(part)] = "any"
        key = text[len(self.text(left.obj.span)) + 1:]
        span = Span(left.name_span.file, left.name_span.line, left.name_span.column, node.span.end_line,
                    node.span.end_column)
        self.error(codes.E205, f"'{key}' after a dot reads as a subtraction ({' - '.join(key.split('-'))})",
                   span, f"a key with '-' is written in brackets: {self.text(left.obj.span)}[\"{key}\"]")
        return Typed(types.element(owner))  # type: ignore[arg-type]  # a map type has an element

    def unquoted_words(self, node: ast.Binary, scope: Scope) -> Typed | None:
        """``node.labels.zone == zone-a``: unknown names where a string fits are reported with a
        hint to quote them (and typed as strings, so nothing else is reported about them)."""
        words = {"left": self.bare_word(node.left, scope), "right": self.bare_word(node.right, scope)}
        items = node.right.items if isinstance(node.right, ast.ListLit) and node.op in ("in", "not in") else ()
        listed = [(item, self.bare_word(item, scope)) for item in items]
        if not any(words.values()) and not any(w for _, w in listed):
            return None
        if (words["left"] and words["right"]) or isinstance(node.left, ast.Literal) \
                or isinstance(node.right, ast.Literal):
            return None  # nothing says a string is meant (or a string is right there): plain errors
        if words["left"]:
            other = self.expr(node.right, scope).type
            fits = other == "string" if node.op not in ("in", "not in") else \
                (other == "string" or types.is_map(other) or types.element(other) == "string")
            quoted: list[tuple[ast.Expr, str]] = [(node.left, words["left"])] if fits else []
        else:
            other = self.expr(node.left, scope).type
            quoted = [(node.right, words["right"])] if words["right"] else \
                [(item, word) for item, word in listed if word]
            if other != "string":
                quoted = []
            for item, word in listed:
                if not word:
                    self.expr(item, scope)
        if not quoted:
            return None if not listed else self.finish_list(node, scope)
        for word_node, word in quoted:
            self.types[id(word_node)] = "string"
            self.error(codes.E202, f"unknown name '{word}'", word_node.span,
                       f"a string is written in quotes: '{word}'")
        return Typed("bool")

    def finish_list(self, node: ast.Binary, scope: Scope) -> Typed:
        """The list's own type once its items were checked one by one."""
        items = [self.types.get(id(i), "any") for i in node.right.items]  # type: ignore[union-attr]  # a list literal
        element = "null"
        for t in items:
            element = types.unify(element, t) or "any"
        self.types[id(node.right)] = f"list[{'any' if element == 'null' else element}]"
        return Typed("bool")

    def bare_word(self, node, scope: Scope) -> str | None:
        """The text of an unknown name, or of unknown names and numbers joined by '-' (zone-a)."""
        parts, stack = [], [node]
        while stack:
            part = stack.pop()
            if isinstance(part, ast.Binary) and part.op == "-":
                stack += [part.left, part.right]
            elif isinstance(part, (ast.Name, ast.Literal)):
                parts.append(part)
            else:
                return None
        names = [p.name for p in parts if isinstance(p, ast.Name)]
        known = [*scope.vars, *scope.lets, *ALL_ROOTS, *schema.SHORTHANDS]
        if not names or any(not self.unknown_name(n, scope) for n in names) or _did_you_mean(names[0], known) \
                or any(isinstance(p, ast.Literal) and not isinstance(p.value, int) for p in parts):
            return None
        text = self.text(node.span)
        return text if re.fullmatch(r"[A-Za-z0-9_-]+", text) else None

    @staticmethod
    def unknown_name(name: str, scope: Scope) -> bool:
        return not (name in scope.vars or name in scope.lets or name in ALL_ROOTS or name in schema.SHORTHANDS)

    def logical(self, node, left: str, right: str) -> Typed:
        for side, t in (("left", left), ("right", right)):
            if not types.loose(t) and t != "bool":
                operand = node.left if side == "left" else node.right
                self.error(codes.E303, f"'{node.op}' needs bool operands, the {side} one is {types.describe(t)}",
                           operand.span, "compare it, e.g. x != null or x > 0")
        return Typed("bool")

    def arithmetic(self, node, left: str, right: str) -> Typed:
        allowed = ("number", "string") if node.op == "+" else ("number",)
        known = [t for t in (left, right) if not types.loose(t)]
        if all(t in allowed or (node.op == "+" and types.is_list(t)) for t in known):
            joined = types.unify(left, right) if len(known) == 2 else (known[0] if known else "any")
            if joined is not None:
                return Typed("any" if joined == "null" else joined)
        hint = self.string_hint(node)
        return self.error(codes.E301, f"'{node.op}' cannot combine {types.describe(left)} and {types.describe(right)}"
                          + (f": {hint}" if hint else ""), node.op_span)

    def coalesce(self, node, left: str, right: str) -> Typed:
        joined = types.unify(left, right)
        if joined is None:
            return self.error(codes.E301, f"'??' sides have different types: {left} and {right}", node.op_span)
        return Typed(joined)

    def membership(self, node, left: str, right: str) -> Typed:
        if types.loose(right):
            return Typed("bool")
        if types.is_list(right):
            if types.unify(left, types.element(right)) is None:  # type: ignore[arg-type]  # a list type has an element
                always = "always true" if node.op == "not in" else "always false"
                self.error(codes.E302, f"'{node.op}' looks for {types.describe(left)} in a {right}: {always}",
                           node.op_span)
        elif types.is_map(right) or right == "string":
            if not types.loose(left) and left != "string":
                self.error(codes.E302, f"'{node.op}' looks for {types.describe(left)} in {types.describe(right)}: "
                           "only strings can be found there", node.op_span)
        else:
            self.error(codes.E301, f"'{node.op}' needs a list, map or string on the right, this is "
                       f"{types.describe(right)}", node.right.span)
        return Typed("bool")

    def comparison(self, node, left: str, right: str) -> Typed:
        if types.loose(left) or types.loose(right):
            return Typed("bool")
        if node.op in ("==", "!="):
            fits = types.unify(left, right) is not None
        else:
            fits = left == right and left in ("number", "string")
        if not fits:
            verb = "compares" if node.op in ("==", "!=") else "orders"
            always = {"==": ": always false", "!=": ": always true"}.get(node.op, "")
            hint = self.string_hint(node)
            said = f": {hint}" if hint else always + (f"; {self.bool_hint(node)}" if self.bool_hint(node) else "")
            self.error(codes.E302, f"'{node.op}' {verb} {types.describe(left)} with {types.describe(right)}{said}",
                       node.op_span)
        return Typed("bool")

    def bool_hint(self, node: ast.Binary) -> str | None:
        """``annotations are strings: write "true"`` for a string compared with ``true``/``false``."""
        for side, other in ((node.left, node.right), (node.right, node.left)):
            if self.types.get(id(side)) == "string" and isinstance(other, ast.Literal) \
                    and isinstance(other.value, bool):
                read = side
                while isinstance(read, ast.Binary) and read.op == "-":  # a dashed key (E205)
                    read = read.left
                owner = read.obj if isinstance(read, (ast.FieldAccess, ast.Index)) else None
                what = owner.name if isinstance(owner, ast.FieldAccess) and owner.name in _STRING_MAPS \
                    else self.text(side.span)
                are = "are strings" if what in _STRING_MAPS else "is a string"
                return f'{what} {are}: compare with "{str(other.value).lower()}"'
        return None

    def string_hint(self, node: ast.Binary) -> str | None:
        """``labels are strings: compare number(node.labels.x)`` for a string-map read beside a number."""
        for side, other in ((node.left, node.right), (node.right, node.left)):
            if self.types.get(id(side)) == "string" and self.types.get(id(other)) == "number":
                owner = side.obj if isinstance(side, (ast.FieldAccess, ast.Index)) else None
                if isinstance(owner, ast.FieldAccess) and owner.name in _STRING_MAPS:
                    return f"{owner.name} are strings: compare number({self.text(side.span)})"
                return f"convert the string with number({self.text(side.span)})"
        return None

    def text(self, span: Span) -> str:
        lines = self.sources.get(span.file, "").split("\n")
        if span.line == span.end_line and span.line <= len(lines):
            return lines[span.line - 1][span.column - 1:span.end_column - 1]
        return "..."

    def expr_Cond(self, node: ast.Cond, scope) -> Typed:
        self.condition(node.test, scope, "'if'")
        then, orelse = self.expr(node.then, scope).type, self.expr(node.orelse, scope).type
        joined = types.unify(then, orelse)
        if joined is None:
            return self.error(codes.E304, f"the branches of 'if' have different types: {then} and {orelse}", node.span)
        return Typed(joined)

    def expr_Aggregate(self, node: ast.Aggregate, scope: Scope) -> Typed:
        items = self.expr(node.iterable, scope)
        if not (types.loose(items.type) or types.is_list(items.type)):
            hint = "iterate keys(m) or values(m)" if types.is_map(items.type) else None
            self.error(codes.E301, f"'for' needs a list, this is {types.describe(items.type)}", node.iterable.span, hint)
        element = types.element(items.type) or "any"
        slot = self.slots.setdefault(id(node), len(self.slots))
        inner = scope.with_var(node.var, Typed(element, items.origin), slot)
        if node.cond is not None:
            self.condition(node.cond, inner, "the 'if' of an aggregate")
        elem = self.expr(node.elem, inner).type
        wanted = {"sum": "number", "min": "number", "max": "number", "any": "bool", "all": "bool"}.get(node.func)
        if wanted and not types.loose(elem) and elem != wanted:
            self.error(codes.E306, f"{node.func}(... for ...) needs {types.describe(wanted)} per element, "
                       f"this is {types.describe(elem)}", node.elem.span)
        return Typed("bool" if node.func in ("any", "all") else "number")


def _origin(obj: Typed) -> tuple[str, tuple] | None:
    """Where a read on ``obj`` starts: its origin, or for an object of a wire type reached without
    one (a map's value, ``values(cluster.queues)``, an ``if`` of two jobs) the object itself."""
    if obj.origin is None and obj.type in READ_ROOTS:
        return (obj.type, ())
    return obj.origin


@functools.lru_cache(maxsize=None)
def _shorthand(name: str):
    text = schema.SHORTHANDS[name][0]
    return parse_expression(text, Locator(f"<shorthand {name}>"))


def _stem(file: str) -> str:
    """A policy file's name as the values file's keys name it: without ``.policy``."""
    return file[:-len(".policy")] if file.endswith(".policy") else file


def _param_fits(type_: str, value: object) -> bool:
    """Whether a default or a values-file value is of a ``param`` type."""
    if type_ == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if type_ == "map[number]":
        return isinstance(value, dict) and all(_param_fits("number", v) for v in value.values())
    return isinstance(value, {"string": str, "bool": bool}[type_])


def _describe_value(value: object) -> str:
    if isinstance(value, bool):
        return f"the bool {str(value).lower()}"
    if isinstance(value, (int, float)):
        return f"the number {value}"
    if isinstance(value, str):
        return f"the string {value!r}"
    if isinstance(value, dict):
        return "a map"
    return "null" if value is None else f"a {type(value).__name__}"


def _example(type_: str) -> str:
    return {"number": "a number, e.g. 2", "string": "a string, e.g. \"a100\"", "bool": "true or false",
            "map[number]": "a map, e.g. {\"nvidia.com/gpu\": 2}"}.get(type_, type_)


def _did_you_mean(name: str, candidates) -> str:
    close = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


def _name_hint(scope: Scope) -> str:
    roots = schema.DECISION_ROOTS[scope.kind] if scope.kind else ALL_ROOTS
    return f"names here: {', '.join([*roots, *_shorthands_of(scope.kind), *scope.lets, *scope.vars])}"


@functools.lru_cache(maxsize=None)
def _shorthands_of(kind: str | None) -> tuple[str, ...]:
    """The shorthands a rule of ``kind`` can use: those whose expansion reads only its names
    (``free_gpu`` reads node: not in an enqueue rule); every one outside a rule."""
    if kind is None:
        return tuple(schema.SHORTHANDS)
    roots = schema.DECISION_ROOTS[kind]
    return tuple(name for name in schema.SHORTHANDS if all(n in roots for n in _names_in(_shorthand(name))))


def _names_in(node) -> set[str]:
    """The names an expression reads."""
    found, stack = set(), [node]
    while stack:
        part = stack.pop()
        if isinstance(part, ast.Name):
            found.add(part.name)
        stack.extend(ast.children(part))
    return found


def _resource_hint(name: str) -> str:
    return f"read other resources by their full name with brackets, e.g. [\"nvidia.com/{name}\"]"


#: What ``counts`` counts besides resources is ``tasks``; these words name other things, never a
#: resource: a key or field ending in one wants session.allocations.
_NOT_RESOURCES = frozenset({"task", "tasks", "job", "jobs", "node", "nodes", "queue", "queues",
                            "allocation", "allocations", "eviction", "evictions"})
#: Kubernetes resource names without a domain (any other resource is "domain/name").
_NATIVE_RESOURCES = frozenset({"cpu", "memory", "storage", "ephemeral-storage", "pods",
                               *schema.RESOURCE_SHORTHANDS})
_ALLOCATIONS_HINT = ("to count this cycle's allocations by job and node together, or only some of them, "
                     "aggregate over session.allocations, e.g. count(a for a in session.allocations "
                     "if a.job == task.job_id and a.node == node.name and a.requests.gpu > 0)")
_COUNTS_FIELDS = "counts has .tasks and the resources .cpu, .memory, .gpu, .pods, .ephemeral_storage"


def _counts_hint(name: str) -> str:
    """The hint for an unknown field on ``counts`` (never a made-up resource name)."""
    if name.lower() in _NOT_RESOURCES:
        return f"{_COUNTS_FIELDS}; {_ALLOCATIONS_HINT}"
    return f"{_COUNTS_FIELDS}; read another resource by its full name in brackets, e.g. [\"nvidia.com/gpumem\"]"


def _counts_key_problem(key: str) -> tuple[str, str] | None:
    """(message, hint) when ``counts[key]`` can only read 0: ``key`` names no resource."""
    last = key.rsplit("/", 1)[-1]
    if key in ("tasks", "task"):
        return (f"unknown key '{key}' on counts: the number of tasks is a field",
                "write .tasks, e.g. session.node.tasks")
    if last.lower() in _NOT_RESOURCES:
        return (f"unknown key '{key}' on counts: counts holds the number of tasks and resource amounts, "
                f"not {last}", _ALLOCATIONS_HINT)
    if "/" not in key and key not in _NATIVE_RESOURCES and not key.startswith(("hugepages-", "attachable-volumes-")):
        return (f"unknown key '{key}' on counts: a resource other than cpu, memory, storage, "
                "ephemeral-storage, pods and hugepages-* is named with its domain",
                f"{_COUNTS_FIELDS}; read another resource by its full name, e.g. [\"nvidia.com/gpumem\"]")
    return None


def _result_hint(kind: str) -> str:
    return "a score rule computes a number" if kind == "score" else f"a {kind} rule is a condition"


def _a(word: str) -> str:
    return f"an {word}" if word[0] in "aeiou" else f"a {word}"


def _a_type(pattern: str) -> str:
    return " or ".join(types.describe(p) for p in pattern.split("|"))
