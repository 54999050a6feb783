"""W401: an ``enqueue`` rule that sizes its job by its pods, which a Volcano Job does not have yet.

Volcano's job controller creates a vcjob's pods only once its PodGroup is Inqueue, so when the
scheduler asks jobEnqueueable the job has no tasks: ``job.total_request`` is 0 and ``job.tasks``
is empty, and a cap written on them lets every vcjob in (seen on a real cluster: a 24-GPU vcjob
through ``job.total_request.gpu <= 16``, e2e/cluster/traces/short.trace.yaml). What the job asks
is its PodGroup's ``spec.minResources`` (``job.min_resources``), which every job that reaches
jobEnqueueable has (actions/enqueue asks only for PodGroups with minResources), and
``job.min_available``. A rule that reads those too is taken to know (``max(job.total_request.gpu,
job.min_resources.gpu)`` covers both a vcjob and a PodGroup made for pods that exist).

The reads are followed through ``let`` s and shorthands, into the rule's guards (the file's and
its ``when``) and its reason; the warning is at the first read, in the file that writes it."""

from __future__ import annotations

from policy_extender.errors import Diagnostic, Span
from policy_extender.lang import ast, codes

#: The fields of the enqueue rule's job that a pod-less job leaves empty, and the reads that
#: show the rule accounts for that (what the PodGroup asks).
EMPTY_AT_ENQUEUE = {"total_request": frozenset({"min_resources"}),
                    "tasks": frozenset({"min_resources", "min_available"})}
_FIELDS = frozenset({"total_request", "tasks", "min_resources", "min_available"})
WHAT = "at enqueue a Volcano Job has no pods yet: job.total_request is 0 and job.tasks is empty"


class _Read:
    def __init__(self, field: str, node: ast.FieldAccess, parent, via: ast.Let | None):
        self.field, self.node, self.parent, self.via = field, node, parent, via


def warnings(checked) -> list[Diagnostic]:
    """W401 for each enqueue rule that reads ``job.total_request`` or ``job.tasks`` and not what
    its PodGroup asks."""
    found = []
    for rule in checked.rules:
        if rule.kind != "enqueue" or rule.rule.span.file.startswith("<"):
            continue
        reads = _Reads(checked.names)
        for expr in _parts(rule):
            reads.walk(expr, None, None)
        seen = {r.field for r in reads.found}
        for read in reads.found:
            if read.field in EMPTY_AT_ENQUEUE and not seen & EMPTY_AT_ENQUEUE[read.field]:
                found.append(_warning(rule, read, checked.sources))
                break
    return found


def _parts(rule) -> list:
    """What the rule evaluates: its expression, its guards (the file's, its ``when``), its reason."""
    parts = [rule.rule.expr, *rule.guards]
    if rule.reason is not None:
        parts += [p for p in rule.reason.parts if not isinstance(p, str)]
    return parts


class _Reads:
    """The job fields of ``_FIELDS`` an expression reads, in source order, through lets and shorthands."""

    def __init__(self, names: dict[int, tuple]):
        self.names = names
        self.found: list[_Read] = []
        self.lets: set[int] = set()  # each let walked once per rule

    def walk(self, node, parent, via: ast.Let | None) -> None:
        if isinstance(node, ast.Name):
            bound = self.names.get(id(node))
            if bound is not None and bound[0] == "let" and id(bound[1]) not in self.lets:
                self.lets.add(id(bound[1]))
                if bound[1].expr is not None:
                    self.walk(bound[1].expr, None, bound[1])
            elif bound is not None and bound[0] == "short":
                self.walk(bound[1], None, via)
            return
        if isinstance(node, ast.FieldAccess) and node.name in _FIELDS and self.is_job(node.obj):
            self.found.append(_Read(node.name, node, parent, via))
        for child in ast.children(node):
            self.walk(child, node, via)

    def is_job(self, node, depth: int = 0) -> bool:
        """``node`` is the rule's own job: the root ``job``, or a let (of a let...) that is just it."""
        if not isinstance(node, ast.Name) or depth > 50:
            return False
        bound = self.names.get(id(node))
        if bound == ("root", "job"):
            return True
        return bound is not None and bound[0] == "let" and bound[1].expr is not None \
            and self.is_job(bound[1].expr, depth + 1)


def _warning(rule, read: _Read, sources: dict[str, str]) -> Diagnostic:
    span = read.node.span
    where = ""
    if read.via is not None:
        at = rule.rule.span
        line = f"line {at.line}" if at.file == span.file else f"{at.file}:{at.line}"
        where = f" (through let '{read.via.name}', read by the rule at {line})"
    message = f"enqueue rule '{rule.name}' reads job.{read.field}{where}: {WHAT}, so the rule sees a job that asks for nothing"
    return Diagnostic(codes.W401, message, span, _fix(read, sources), severity="warning")


def _fix(read: _Read, sources: dict[str, str]) -> str:
    """How to read what the PodGroup asks, written from the rule's own text where it can be."""
    asks = ("read what the job's PodGroup asks (spec.minResources, the requests of its minAvailable tasks; "
            "every job Volcano asks jobEnqueueable about has it)")
    parent = read.parent
    if read.field == "total_request":
        whole = parent if isinstance(parent, (ast.FieldAccess, ast.Index)) and parent.obj is read.node else read.node
        written = _text(whole.span, sources)
        written_min = written.replace("total_request", "min_resources", 1) if written else None
        if whole is not read.node and written and written_min:
            return (f"{asks}: max({written}, {written_min}) covers a Volcano Job and a PodGroup made for pods "
                    f"that exist; or {written_min} alone")
        return f"{asks}: max(job.total_request.X, job.min_resources.X) for a resource X, or job.min_resources"
    counted = parent if isinstance(parent, ast.Call) and parent.func == "count" else None
    written = _text(counted.span, sources) if counted is not None else None
    if written:
        return (f"{asks}: max({written}, job.min_available) for the number of tasks, job.min_resources for what "
                "they request")
    return (f"{asks}: job.min_available for the number of tasks, job.min_resources (or max(job.total_request.X, "
            "job.min_resources.X)) for what they request")


def _text(span: Span, sources: dict[str, str]) -> str | None:
    lines = sources.get(span.file, "").split("\n")
    if span.line == span.end_line and span.line <= len(lines):
        return lines[span.line - 1][span.column - 1:span.end_column - 1] or None
    return None
