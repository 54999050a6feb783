"""What a rule costs a call, estimated from its expression before it runs (issue 47 item 4).

A rule's cost is how many evaluations and list elements it takes in one call (the elements are
what the call's budget bounds: ``lang.budget``, E512), as a polynomial in the sizes a cluster grows by:

====  ==================================================================  ===========
N     nodes: ``cluster.nodes``, and the nodes of a prioritize call         grows
A     this cycle's allocations: ``session.allocations``, ``.evictions``    grows
J     tasks of a job: ``job.tasks``                                        grows
T     tasks (pods) on a node: ``node.tasks``; also the evictees of a call  bounded by max pods (110)
Q     queues: ``values(cluster.queues)``, ``keys(cluster.jobs)``...        tens
====  ==================================================================  ===========

Any other list (labels, tolerations, ``split()``) counts as one: small and bounded by the object.
An aggregate costs its list's size times what its condition and element cost; a builtin or ``in``
over a list its size; a score rule is evaluated once per node of the call (x N), a victim rule
once per evictee (x T). The estimate is an upper bound of the shape, not of the constant: an
aggregate over ``session.allocations`` whose condition the index narrows (``a.node == ...``) still
charges the whole list, as the budget does.

A rule whose cost has a term with two growing sizes (``N·N``, ``N·A``, ``A·J``...) is quadratic in the
cluster: W501, at the aggregate that makes it so, with the rewrite that avoids it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from policy_extender.errors import Diagnostic, Span
from policy_extender.lang import ast, budget, codes

#: The sizes that grow with the cluster (a term with two of them is quadratic in it).
GROWING = ("N", "A", "J")
WORDS = {"N": "nodes", "A": "this cycle's allocations", "J": "tasks of a job", "T": "tasks on a node",
         "Q": "queues"}
#: A cluster to say what a term comes to: 2,000 nodes, 600 allocations (issue 47's), 100 tasks a
#: job, 30 pods a node, 20 queues.
REFERENCE = {"N": 2000, "A": 600, "J": 100, "T": 30, "Q": 20}
#: How many times a rule of each kind is evaluated in one call.
PER_CALL = {"score": ("N",), "victim": ("T",), "preemptable": ("T",), "reclaimable": ("T",)}

Term = tuple[str, ...]  # sorted sizes multiplied: ("A", "N") is N·A; () is 1


@dataclass(frozen=True)
class Cost:
    """A rule's estimate: its terms (each a product of sizes), per call."""

    rule: str
    kind: str
    terms: frozenset[Term]

    def text(self) -> str:
        """``N·A + N`` (the terms of highest degree first); ``1`` when it visits no list."""
        shown = [_term_text(t) for t in _ordered(self.terms) if t]
        return " + ".join(shown) or "1"

    @property
    def degree(self) -> int:
        """The largest number of growing sizes in one term (2: quadratic in the cluster)."""
        return max((_growing(t) for t in self.terms), default=0)

    def at(self, sizes: dict[str, int] = REFERENCE) -> int:
        """The estimate at ``sizes`` (each term's product, summed)."""
        total = 0
        for term in self.terms:
            product = 1
            for size in term:
                product *= sizes[size]
            total += product
        return total


def _term_text(term: Term) -> str:
    counted = Counter(term)
    return "·".join(s if n == 1 else f"{s}^{n}" for s, n in sorted(counted.items(), key=lambda i: "NAJTQ".index(i[0])))


def _ordered(terms) -> list[Term]:
    return sorted(terms, key=lambda t: (-len(t), _term_text(t)))


def _growing(term: Term) -> int:
    return sum(1 for s in term if s in GROWING)


def _times(terms: frozenset[Term], factor: Term) -> frozenset[Term]:
    return frozenset(tuple(sorted(t + factor)) for t in terms)


def _plus(*parts: frozenset[Term]) -> frozenset[Term]:
    """The terms of a sum, without those another term of the sum covers (``N`` under ``N·A``)."""
    every = set().union(*parts)
    return frozenset(t for t in every if not any(o != t and _covers(o, t) for o in every))


def _covers(big: Term, small: Term) -> bool:
    need = Counter(small)
    have = Counter(big)
    return all(have[s] >= n for s, n in need.items())


ONE: frozenset[Term] = frozenset({()})


@dataclass
class Finding:
    """An aggregate that makes its rule quadratic: where, the sizes around it and its own."""

    span: Span
    outer: Term
    size: Term
    iterable: str  # the list, as a path (cluster.nodes, session.allocations ...)


class Estimator:
    """Walks one checked set's expressions (``checker.Checked``: its types and names)."""

    def __init__(self, checked) -> None:
        self.checked = checked
        self.findings: list[Finding] = []

    def type_of(self, node) -> str:
        return self.checked.types.get(id(node), "any")

    def rule(self, checked_rule) -> Cost:
        self.findings = []
        outer: Term = PER_CALL.get(checked_rule.kind, ())
        parts = [self.expr(g, outer) for g in checked_rule.guards] + [self.expr(checked_rule.rule.expr, outer)]
        return Cost(checked_rule.name, checked_rule.kind, _times(_plus(ONE, *parts), outer))

    def expr(self, node, outer: Term) -> frozenset[Term]:
        """What evaluating ``node`` once visits (terms); ``outer``: the sizes it is evaluated under."""
        if isinstance(node, ast.Aggregate):
            size = self.size(node.iterable)
            inner = outer + size
            if _growing(tuple(inner)) >= 2 and _growing(tuple(outer)) < 2:
                self.findings.append(Finding(node.span, outer, size, self.path(node.iterable)))
            body = [self.expr(node.elem, inner)] + ([self.expr(node.cond, inner)] if node.cond is not None else [])
            return _plus(_times(_plus(ONE, *body), size), self.expr(node.iterable, outer))
        if isinstance(node, ast.Call):
            args = [self.expr(a, outer) for a in node.args]
            lists = [frozenset({self.size(a)}) for a in node.args if self.is_list(a)]
            return _plus(ONE, *args, *lists)
        if isinstance(node, ast.Binary):
            parts = [self.expr(node.left, outer), self.expr(node.right, outer)]
            if node.op in ("in", "not in") and self.is_list(node.right):
                parts.append(frozenset({self.size(node.right)}))
            return _plus(*parts)
        if isinstance(node, ast.Name):
            what, target = self.checked.names.get(id(node), (None, None))
            if what == "let":
                return self.expr(target.expr, outer)
            if what == "short":
                return self.expr(target, outer)
            return ONE
        if isinstance(node, (ast.FieldAccess,)):
            return self.expr(node.obj, outer)
        if isinstance(node, ast.Index):
            return _plus(self.expr(node.obj, outer), self.expr(node.key, outer))
        if isinstance(node, ast.Unary):
            return self.expr(node.operand, outer)
        if isinstance(node, ast.Cond):
            return _plus(self.expr(node.test, outer), self.expr(node.then, outer), self.expr(node.orelse, outer))
        if isinstance(node, ast.ListLit):
            return _plus(ONE, *(self.expr(i, outer) for i in node.items))
        return ONE

    def is_list(self, node) -> bool:
        return self.type_of(node).startswith("list[")

    def size(self, node) -> Term:
        """The size symbol of the list ``node`` evaluates to: ``("N",)``, or ``()`` for a small list."""
        if isinstance(node, ast.Name):
            what, target = self.checked.names.get(id(node), (None, None))
            if what == "let":
                return self.size(target.expr)
            if what == "short":
                return self.size(target)
            return ()
        if isinstance(node, ast.FieldAccess):
            owner = self.type_of(node.obj)
            if node.name == "nodes" and owner == "cluster":
                return ("N",)
            if node.name in ("allocations", "evictions") and owner == "session":
                return ("A",)
            if node.name == "tasks" and owner == "node":
                return ("T",)
            if node.name == "tasks" and owner == "job":
                return ("J",)
            return ()
        if isinstance(node, ast.Call) and node.func in ("values", "keys") and node.args:
            inner = node.args[0]
            if isinstance(inner, ast.FieldAccess) and inner.name in ("queues", "jobs") and self.type_of(inner.obj) == "cluster":
                return ("Q",)
        if isinstance(node, ast.Binary) and node.op == "+":  # list + list
            return self.size(node.left) or self.size(node.right)
        if isinstance(node, ast.Binary) and node.op == "??":
            return self.size(node.left) or self.size(node.right)
        return ()

    def path(self, node) -> str:
        source = self.checked.sources.get(node.span.file, "").split("\n")
        span = node.span
        if span.line == span.end_line and span.line <= len(source):
            return source[span.line - 1][span.column - 1:span.end_column - 1]
        return "the list"


def estimates(checked) -> list[Cost]:
    """Every rule's estimate, in rule order."""
    estimator = Estimator(checked)
    return [estimator.rule(r) for r in checked.rules]


def warnings(checked) -> list[Diagnostic]:
    """W501 for each rule quadratic or worse in the cluster's size, at the aggregate that makes it so."""
    estimator = Estimator(checked)
    found = []
    for checked_rule in checked.rules:
        if checked_rule.rule.span.file.startswith("<"):
            continue
        cost = estimator.rule(checked_rule)
        if cost.degree < 2 or not estimator.findings:
            continue
        finding = estimator.findings[0]
        reference = cost.at()
        over = (f", over the call's budget of {budget.MAX_WORK:,} (E512)" if reference > budget.MAX_WORK else "")
        used = sorted(set(s for t in cost.terms for s in t), key="NAJTQ".index)
        sizes = ", ".join(f"{s} {WORDS[s]}" for s in used)
        at = " and ".join(f"{REFERENCE[s]:,} {WORDS[s]}" for s in used)
        found.append(Diagnostic(
            codes.W501,
            f"rule '{cost.rule}' costs about {cost.text()} elements a call ({sizes}): quadratic in the cluster's "
            f"size; at {at} that is {reference:,}{over}",
            finding.span, rewrite(cost.kind, finding), severity="warning"))
    return found


def rewrite(kind: str, finding: Finding) -> str:
    """How to write the rule without the quadratic term ``finding`` makes."""
    outer, size = set(finding.outer), set(finding.size)
    if size == {"A"} and kind == "score" and outer == {"N"}:
        return (f"a score rule is evaluated once per node of the call, and each evaluation is charged the whole of "
                f"{finding.iterable} (the index narrows the loop, not the charge): read the node's own count, "
                "session.node.tasks or session.nodes[node.name].gpu, a map lookup that visits nothing")
    if size == {"A"} and "N" in outer:
        per = "node" if kind == "score" else "node of the outer aggregate"
        return (f"{finding.iterable} is visited once per {per}: read the node's count instead, "
                "session.nodes[n.name].tasks (or its resources, session.nodes[n.name].gpu), a map lookup "
                "that visits nothing; check --scale measures the rewrite")
    if size == {"N"} and kind == "score" and outer == {"N"}:
        return ("a score rule is evaluated once per node of the call, so an aggregate over cluster.nodes in it "
                "visits nodes x nodes: for a cluster-wide total read cluster.idle, cluster.used, "
                "cluster.allocatable or cluster.node_count (computed once per session); to rank a node against "
                "the others, score its own value and let `normalize 0 to 100` scale it across the call's nodes")
    if size == {"N"} and "N" in outer:
        return ("an aggregate over cluster.nodes inside another one visits nodes x nodes: compare with a "
                "cluster-wide total (cluster.idle, cluster.node_count) or a per-node count "
                "(session.nodes[...]) instead of a second pass over the nodes")
    return ("nest fewer aggregates over lists that grow with the cluster: read a count kept per node, job or "
            "queue (session.nodes, session.jobs, session.queues, cluster.jobs) where one exists")
