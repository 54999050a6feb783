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

#: Volcano's plugins that register a victim function, and for which action: ``preempt`` is
#: ``AddPreemptableFn`` (Session.Preemptable), ``reclaim`` ``AddReclaimableFn``
#: (Session.Reclaimable). Read from pkg/scheduler/plugins/*/ at v1.10.0, v1.11.2 and
#: v1.15.1, where the list is the same (drf's reclaim function only with enableHierarchy; the
#: extender's only with its preemptableVerb / reclaimableVerb). Each is switched off per plugin
#: in the conf with ``enablePreemptable: false`` / ``enableReclaimable: false``
#: (conf.PluginOption; unset means on).
VICTIM_PLUGINS: dict[str, tuple[str, ...]] = {
    "priority": ("preempt",), "gang": ("preempt", "reclaim"), "conformance": ("preempt", "reclaim"),
    "drf": ("preempt", "reclaim"), "proportion": ("reclaim",), "capacity": ("reclaim",),
    "pdb": ("preempt", "reclaim"), "cdp": ("preempt", "reclaim"), "tdm": ("preempt",),
    "extender": ("preempt", "reclaim"),
}
#: The conf switch of each action's victim functions.
VICTIM_SWITCH = {"preempt": "enablePreemptable", "reclaim": "enableReclaimable"}
