"""check: resolve every name, type every expression, validate rule structure; collect ALL errors.

The result (``Checked``) is what the compiler needs: the rules with their guards and modifiers,
the type of every expression node, what every ``Name`` refers to, the aggregate variable slots,
and what each root object type is read for (``reads``: chains of (type, field) steps, which
the wire layer turns into the Go key paths its pruned decoders keep, ``wire.paths.go_reads``).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from policy_extender import schema
from policy_extender.errors import Diagnostic, PolicyError, Span
from policy_extender.lang import ast, codes, types
from policy_extender.lang.builtins import BUILTINS, RefusedLiteral
from policy_extender.lang.hints import (Hints, a_type, counts_hint, counts_key_problem, did_you_mean, name_hint,
                                        parsed_shorthand, resource_hint, result_hint, shorthands_of, with_article)
from policy_extender.lang.params import ParamChecks
from policy_extender.lang.scope import ALL_ROOTS, READ_ROOTS, WIRE_ROOTS, Scope, Typed
from policy_extender.lang.values import Setting

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
#: Roots whose object comes from the session snapshot, not from the request body, by rule kind
#: (a filter's ``job`` is its task's job looked up in the snapshot; an enqueue's is the body's).
_SNAPSHOT_ROOTS = {"filter": ("job", "queue"), "score": ("job", "queue"), "enqueue": ("queue",),
                   "ready": ("queue",)}


def _protocols_of(statement: ast.Protocol | None) -> frozenset[str]:
    """The schedulers a file's rules serve: its ``protocol`` statement's known names."""
    if statement is None:
        return schema.DEFAULT_PROTOCOLS
    return frozenset(n for n in statement.names if n in schema.PROTOCOL_KINDS) or schema.DEFAULT_PROTOCOLS


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


def check(files: list[ast.PolicyFile], settings: list[Setting] | tuple = ()) -> Checked:
    """Check a whole policy set (``settings``: its values file's, ``lang.values``); raises
    ``PolicyError`` with every problem found."""
    return Checker(files, settings).run()


class Checker(ParamChecks, Hints):
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
                       rule.expr.span, result_hint(rule.kind))

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
        candidates = [*scope.vars, *scope.lets, *roots, *shorthands_of(scope.kind)]
        if name in MODIFIER_KINDS:  # `x and` then an indented `unresolvable`: read as a name
            return self.error(codes.E202, f"unknown name '{name}': '{name}' is a modifier, read here as part of "
                              "the expression", node.span, self.modifier_hint(node.span))
        return self.error(codes.E202, f"unknown name '{name}'{did_you_mean(name, candidates)}", node.span,
                          name_hint(scope))

    def unavailable(self, node: ast.Name, scope: Scope) -> Typed:
        roots = ", ".join(schema.DECISION_ROOTS[scope.kind])  # type: ignore[index]  # a rule's scope: kind is set
        via = f" ('{scope.shorthand}' reads {node.name})" if scope.shorthand else ""
        return self.error(codes.E401, f"'{node.name}' is not available in {with_article(scope.kind)} rule{via}", node.span,  # type: ignore[arg-type]  # as above
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
        expansion = ast.respan(parsed_shorthand(node.name), node.span)
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

    def object_field(self, node: ast.FieldAccess, obj: Typed, scope: Scope) -> Typed:
        f = schema.field(obj.type, node.name)
        if f is None:
            hint = (counts_hint(node.name) if obj.type == "counts"
                    else resource_hint(node.name) if obj.type == "resources" else None)
            return self.error(codes.E201, f"unknown field '{node.name}' on {obj.type}"
                              f"{did_you_mean(node.name, schema.TYPES[obj.type])}", node.name_span, hint)
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
                problem = counts_key_problem(node.key.value)
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
            return self.error(codes.E203, f"unknown function '{node.func}'{did_you_mean(node.func, BUILTINS)}",
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
                self.error(codes.E306, f"argument {i + 1} of {node.func}() must be {a_type(param)}, "
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
            hint = self.string_hint(node) or self.object_hint(node)
            said = f": {hint}" if hint else always + (f"; {self.bool_hint(node)}" if self.bool_hint(node) else "")
            self.error(codes.E302, f"'{node.op}' {verb} {types.describe(left)} with {types.describe(right)}{said}",
                       node.op_span)
        return Typed("bool")

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
