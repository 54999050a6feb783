"""Volcano's verb kinds (``extender.<kind>Verb``), the one place they are written, in the order
of its extender plugin's arguments (``extender.go``). Imports nothing: the CLI and the
configuration read them at start-up; ``decide.table.VERBS`` says what each one does."""

ON_SESSION_OPEN = "onSessionOpen"
ON_SESSION_CLOSE = "onSessionClose"
PREDICATE = "predicate"
PRIORITIZE = "prioritize"
PREEMPTABLE = "preemptable"
RECLAIMABLE = "reclaimable"
QUEUE_OVERUSED = "queueOverused"
JOB_ENQUEUEABLE = "jobEnqueueable"
JOB_ENQUEUED = "jobEnqueued"
JOB_READY = "jobReady"
ALLOCATE = "allocateFunc"
DEALLOCATE = "deallocateFunc"

VERB_KINDS: tuple[str, ...] = (ON_SESSION_OPEN, ON_SESSION_CLOSE, PREDICATE, PRIORITIZE, PREEMPTABLE,
                               RECLAIMABLE, QUEUE_OVERUSED, JOB_ENQUEUEABLE, JOB_ENQUEUED, JOB_READY,
                               ALLOCATE, DEALLOCATE)
