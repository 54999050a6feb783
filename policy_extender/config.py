"""The service's configuration: one dataclass, four sources.

Precedence, highest first: command-line flags > environment variables (``POLICY_EXTENDER_<NAME>``)
> the YAML file given with ``--config`` (read with ``yaml.safe_load``) > the defaults below.
Every option is one field of :class:`Config`; its metadata holds the help text and the parser
that turns a flag, an environment variable or a YAML scalar into the field's value.
``docs/configuration.md`` is generated from these fields (:func:`markdown_table`) and a test keeps
the two identical.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import yaml

from policy_extender.store_url import scheme_of
from policy_extender.verb_names import kube_scheduler
from policy_extender.verb_names.volcano import ON_SESSION_OPEN, PRIORITIZE, VERB_KINDS

ENV_PREFIX = "POLICY_EXTENDER_"


MIB = 1024 * 1024
_SIZE_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "kib": 1024, "m": 1000**2, "mb": 1000**2,
               "mib": MIB, "g": 1000**3, "gb": 1000**3, "gib": 1024**3}


#: Verbs whose body limit is not ``body_limit``: the snapshot is the whole cluster (268 MB at 500
#: nodes x 30 pods), and prioritize embeds every candidate node with its pods (93 MB at 500 nodes).
#: kube-scheduler's filter and prioritize carry each candidate v1.Node whole (its images list
#: included: tens of KB each, 5,000 nodes with `percentageOfNodesToScore: 100`), its preempt
#: every candidate node's victim pods.
DEFAULT_BODY_LIMITS = {ON_SESSION_OPEN: 1024 * MIB, PRIORITIZE: 256 * MIB,
                       **{kind: 256 * MIB for kind in kube_scheduler.VERB_KINDS}}


class ConfigError(ValueError):
    """A bad option: the message says where it came from, what is wrong and how to fix it."""


# ---------------------------------------------------------------------------------------------
# parsers: text (flag, environment, YAML scalar) or YAML value -> field value


def parse_str(value: Any) -> str:
    if isinstance(value, (dict, list)):
        raise ValueError("expected a single value, not a list or mapping")
    return str(value)


def parse_int(value: Any) -> int:
    if isinstance(value, bool) or not re.fullmatch(r"\s*\d+\s*", str(value)):
        raise ValueError(f"expected a whole number >= 0, got {value!r}")
    return int(value)


def parse_float(value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"expected a number of seconds, got {value!r}") from None
    if not math.isfinite(number) or number < 0:
        raise ValueError(f"expected a finite number >= 0, got {value!r}")
    return number


def parse_positive(value: Any) -> float:
    """A finite number of seconds > 0 (0 would end every session, or time out every call, at once)."""
    number = parse_float(value)
    if number <= 0:
        raise ValueError(f"expected a number of seconds > 0, got {value!r}")
    return number


def parse_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "yes", "on", "1"):
        return True
    if text in ("false", "no", "off", "0"):
        return False
    raise ValueError(f"expected true or false, got {value!r}")


def parse_size(value: Any) -> int:
    """``16MiB``, ``512 MiB``, ``1GB``, ``1048576`` -> bytes."""
    match = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", str(value))
    unit = match.group(2).lower() if match else None
    if not match or unit not in _SIZE_UNITS:
        raise ValueError(f"expected a size such as 16MiB, 512MiB or 1048576, got {value!r}")
    return int(match.group(1)) * _SIZE_UNITS[unit]


def parse_list(value: Any) -> tuple[str, ...]:
    """A YAML list, or text separated by commas (or the OS path separator)."""
    if isinstance(value, (list, tuple)):
        return tuple(str(item) for item in value)
    parts = re.split(rf"[,{re.escape(os.pathsep)}]", str(value))
    return tuple(part.strip() for part in parts if part.strip())


def parse_mapping(value: Any) -> dict[str, str]:
    """A YAML mapping, or text ``key=value,key=value``."""
    if isinstance(value, Mapping):
        return {str(k): str(v) for k, v in value.items()}
    pairs = {}
    for item in filter(None, (part.strip() for part in str(value).split(","))):
        key, sep, val = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"expected key=value[,key=value...], got {item!r}")
        pairs[key.strip()] = val.strip()
    return pairs


def _keyed_by(value: Any, keys: tuple[str, ...], what: str = "verb kind") -> dict[str, str]:
    """A ``key=value`` mapping whose keys must all be in ``keys``."""
    mapping = parse_mapping(value)
    unknown = sorted(set(mapping) - set(keys))
    if unknown:
        raise ValueError(f"unknown {what} {unknown[0]!r}; the {what}s are {', '.join(keys)}")
    return mapping


def _segments(verbs: dict[str, str], example: str) -> dict[str, str]:
    for kind, path in verbs.items():
        if not re.fullmatch(r"[A-Za-z0-9._~-]+", path):
            raise ValueError(f"verb path for {kind} must be one URL segment such as {example}, got {path!r}")
    return verbs


def parse_verbs(value: Any) -> dict[str, str]:
    return _segments(_keyed_by(value, VERB_KINDS), "customFilter")


def parse_kube_scheduler_verbs(value: Any) -> dict[str, str]:
    """``filter=myFilter,...``: keyed by kube-scheduler's config names (``filterVerb`` -> filter)."""
    names = tuple(kube_scheduler.CONFIG_NAMES.values())
    return _segments(_keyed_by(value, names, "kube-scheduler verb"), "myFilter")


def parse_limits(value: Any) -> dict[str, int]:
    limits = _keyed_by(value, VERB_KINDS + kube_scheduler.VERB_KINDS)
    return {**DEFAULT_BODY_LIMITS, **{kind: parse_size(size) for kind, size in limits.items()}}


def parse_path_prefix(value: Any) -> str:
    """``/kube-scheduler/``, ``kube-scheduler``, ``/a/b`` -> ``/kube-scheduler``, ``/a/b``; empty
    (or ``/``-less blank) stays empty."""
    text = parse_str(value).strip()
    segments = [part for part in text.split("/") if part]
    for part in segments:
        if not re.fullmatch(r"[A-Za-z0-9._~-]+", part) or part in (".", ".."):
            raise ValueError(f"expected a URL path such as /kube-scheduler/ (letters, digits, . _ ~ - "
                             f"between slashes), got {value!r}")
    if text and not segments:
        raise ValueError(f"{value!r} would put kube-scheduler's verbs at the root, beside Volcano's "
                         "(both have a prioritize): give a prefix such as /kube-scheduler/, or an "
                         "empty value to serve no kube-scheduler verbs")
    return "/" + "/".join(segments) if segments else ""


def parse_redact(value: Any) -> tuple[str, ...]:
    kinds = parse_list(value)
    unknown = sorted(set(kinds) - {"annotations", "env"})
    if unknown:
        raise ValueError(f"unknown redaction {unknown[0]!r}: use annotations and/or env, comma-separated")
    return kinds


def parse_choice(*choices: str) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        text = str(value).lower()
        if text not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}, got {value!r}")
        return text
    return parse


def parse_optional_bind(value: Any) -> str:
    """``parse_bind``, or empty (off)."""
    return parse_bind(value) if str(value).strip() else ""


def _listener(bind: str) -> str:
    """What tells two bind addresses' connections apart: the port (HOST:PORT), or the path."""
    return bind if bind.startswith("unix:") else bind.rsplit(":", 1)[1]


def parse_store(value: Any) -> str:
    """A setting of a kind store_url.SCHEMES lists, checked there (a malformed Sentinel address
    fails at start, naming what is wrong); session/factory.py opens it through the same registry."""
    text = str(value)
    scheme_of(text)
    return text


def parse_bind(value: Any) -> str:
    text = str(value)
    if not (text.startswith("unix:") or re.fullmatch(r"\[?[^\s\]]*\]?:\d+", text)):
        raise ValueError(f"expected HOST:PORT (such as 127.0.0.1:8713) or unix:PATH, got {value!r}")
    return text


# ---------------------------------------------------------------------------------------------
# the options


def option(default: Any, help: str, parse: Callable[[Any], Any], *, factory: bool = False,
           shown: str | None = None) -> Any:
    meta = {"help": help, "parse": parse, "shown": shown}
    if factory:
        return field(default_factory=default, metadata=meta)
    return field(default=default, metadata=meta)


def default_workers() -> int:
    return os.cpu_count() or 1


@dataclass(frozen=True)
class Config:
    bind: str = option("127.0.0.1:8713", "Address to listen on: HOST:PORT or unix:PATH. The default is "
                       "the sidecar URL Volcano's `extender.urlPrefix` points at.", parse_bind)
    ops_bind: str = option("", "Address of a second port for everything that is not a verb "
                           "(`/healthz`, `/readyz`, `/status`, `/metrics`, `/why`): HOST:PORT or "
                           "unix:PATH. Set, the `bind` port answers the verbs alone and this one the "
                           "rest alone, so a NetworkPolicy can admit the scheduler to the verbs and "
                           "Prometheus, the kubelet's probes and people to the rest "
                           "(docs/security.md, \"Ports\"). Empty: both on `bind`.", parse_optional_bind)
    workers: int = option(default_workers, "gunicorn worker processes.", parse_int, factory=True,
                          shown="the machine's CPU count")
    threads: int = option(4, "Threads per worker (gthread workers: each keeps Volcano's keep-alive "
                          "connections; 16 parallel predicate calls need workers x threads >= 16).", parse_int)
    policy_dirs: tuple[str, ...] = option(("policies",), "Directories of `*.policy` files (list, or "
                                          "comma-separated in a flag or environment variable).", parse_list)
    values_file: str = option("", "The values file of the set (`--values FILE`): the cluster's values "
                              "of the policies' `param`s, read with the policy directories as one set "
                              "(its name ends in `values.yaml`; a policy directory holding its own "
                              "values file as well is an error naming both: docs/configuration.md, "
                              "\"One set per cluster\"). Empty: only the directories' files.", parse_str)
    verbs: dict[str, str] = option(dict, "URL path of each verb kind, when the scheduler's "
                                   "`extender.<kind>Verb` renames it: `predicate=customFilter,...` or a "
                                   "YAML mapping. Unnamed kinds keep their own name as path.",
                                   parse_verbs, factory=True, shown="each kind's own name")
    path_prefix: str = option("", "Path before every verb, when `extender.urlPrefix` has one "
                              "(`http://host:8713/extender` -> `/extender`).", parse_str)
    kube_scheduler_prefix: str = option("/kube-scheduler/", "Path before kube-scheduler's extender "
                                        "verbs (`filter`, `prioritize`, `preempt`), served beside "
                                        "Volcano's: its `extenders[].urlPrefix` is "
                                        "`http://HOST:8713/kube-scheduler` (`policy-extender "
                                        "kube-scheduler-conf` prints the entry; docs/kube-scheduler.md). "
                                        "`path_prefix` does not apply to it. Empty: no kube-scheduler "
                                        "verbs.", parse_path_prefix)
    kube_scheduler_verbs: dict[str, str] = option(dict, "URL path of each kube-scheduler verb under "
                                                  "`kube_scheduler_prefix`, when its extender's "
                                                  "`filterVerb`, `prioritizeVerb` or `preemptVerb` "
                                                  "renames it: `filter=myFilter,...` or a YAML mapping "
                                                  "(keys filter, prioritize, preempt). Unnamed verbs "
                                                  "keep their own name as path.",
                                                  parse_kube_scheduler_verbs, factory=True,
                                                  shown="each verb's own name")
    session_store: str = option("sqlite:", "Shared session store: `sqlite:` (a file private to this "
                                "`serve`, in its runtime directory on /dev/shm, else the temp "
                                "directory, removed at exit), `sqlite:PATH` (a file one `serve` owns "
                                "at a time: a second one pointed at it refuses to start), "
                                "`redis://HOST:PORT/DB` (shared by several replicas), or Redis behind "
                                "Sentinel: `redis+sentinel://[:PASSWORD@]HOST:PORT,HOST:PORT,.../MASTER/DB` "
                                "(the sentinels, the name they monitor the master under, the database; "
                                "`?sentinel_password=P` when the sentinels require one). A session "
                                "opened before a failover answers 503 until the next onSessionOpen.",
                                parse_store)
    session_ttl: float = option(300.0, "Seconds after which a session never closed is forgotten "
                                "(> 0).", parse_positive)
    redis_timeout: float = option(0.25, "Seconds to connect to the Redis session store and to wait "
                                  "for each answer (> 0); keep it well under Volcano's "
                                  "`extender.httpTimeout`, so a paused or unreachable Redis fails "
                                  "the call (503: `ignorable` decides) instead of holding a worker "
                                  "thread. Opening and closing a session, which write or delete the "
                                  "snapshot, wait up to max(1 s, 4 x this).", parse_positive)
    redis_wait_replicas: int = option(0, "Replicas that must acknowledge the session's open and each "
                                      "allocate/deallocate event (Redis `WAIT`) before the call "
                                      "answers 200; fewer within `redis_wait_timeout` answer 503. So "
                                      "an answered open or event survives a failover. 0: off (writes "
                                      "are replicated asynchronously).", parse_int)
    redis_wait_timeout: float = option(0.1, "Seconds a write waits for `redis_wait_replicas` "
                                       "acknowledgements (> 0); added to the call's Redis timeout.",
                                       parse_positive)
    require_session: bool = option(False, "Answer 500 (`{\"error\": ...}`) instead of deciding when a "
                                   "call's rules read session data (`task.job`, the snapshot's `job` or "
                                   "`queue`, `session.*` except `session.open`) and no session is open "
                                   "or the task's job is not in its snapshot, so that Volcano's "
                                   "`extender.ignorable` decides; pair it with `ignorable: false` for "
                                   "policies that must not decide without the snapshot. Off: such rules "
                                   "see null and zeros (counted and logged either way; "
                                   "docs/operations.md, \"Calls without a session\").", parse_bool)
    volcano_timeout: float = option(1.0, "Set it to the scheduler's `extender.httpTimeout`, in seconds "
                                    "(Volcano's default is 1). An onSessionOpen that takes longer to "
                                    "receive and store is logged at WARNING and counted "
                                    "(`policy_extender_session_open_late_total`): Volcano gave up on "
                                    "it. A deciding call still evaluating its rules this long after its "
                                    "first byte stops and answers 500 (E513: Volcano no longer waits, "
                                    "`extender.ignorable` decides; docs/language.md). 0: neither.", parse_float)
    body_limit: int = option(16 * MIB, "Largest request body for any verb without its own limit "
                             "(bytes, or 16MiB, 1GB ...). A larger body is answered 413.", parse_size)
    body_limits: dict[str, int] = option(lambda: dict(DEFAULT_BODY_LIMITS), "Per-verb body limits: "
                                         "`onSessionOpen=512MiB,prioritize=128MiB` or a YAML mapping; "
                                         "kube-scheduler's verbs by kind: `kube-scheduler.filter`, "
                                         "`kube-scheduler.prioritize`, `kube-scheduler.preempt`.",
                                         parse_limits, factory=True,
                                         shown="onSessionOpen=1024MiB,prioritize=256MiB, 256MiB for each "
                                               "kube-scheduler verb")
    body_timeout: float = option(10.0, "Seconds a request (headers and body) may take to arrive "
                                 "in full, counted from its first byte (from the accept, for a new "
                                 "connection); a slower client is answered 408 and disconnected. "
                                 "Until a request is whole, the worker's event loop receives it and "
                                 "no thread waits for it, so clients that send slowly cannot hold the "
                                 "threads that answer Volcano, however large the body (`body_memory` "
                                 "bounds what the bodies arriving hold). 0: the event loop closes a "
                                 "request not whole after 120 s.",
                                 parse_float)
    body_memory: int = option(512 * MIB, "Bytes of requests a worker holds while they arrive (> 0): "
                              "every request is received whole by the worker's event loop before a "
                              "thread takes it, and the bytes received so far of those not yet whole "
                              "count here. Beyond it the one that made no progress longest is closed "
                              "(503), so clients that send part of a large body and stall cost memory "
                              "up to this bound, never a thread; a body larger than this is refused "
                              "(413). Keep it at least the largest onSessionOpen the scheduler sends, "
                              "and workers x (this + ~150 MiB) under the pod's memory limit "
                              "(docs/reliability.md, \"Slow and stalled clients\").", parse_size)
    log_level: str = option("info", "debug, info, warning or error.",
                            parse_choice("debug", "info", "warning", "error"))
    log_format: str = option("text", "text or json (one JSON object per line).", parse_choice("text", "json"))
    allow_empty_policy_set: bool = option(False, "Load a policy set without a single `*.policy` "
                                          "file (every node fits, nothing is decided). Off: an empty "
                                          "set is a load error like a set that does not compile (a "
                                          "ConfigMap mounted with the wrong key, a typo in "
                                          "`policy_dirs`): the last good set keeps serving, and an "
                                          "instance that never had one is not ready.", parse_bool)
    reload_interval: float = option(5.0, "Seconds between checks of the policy directories for "
                                    "changes (0: never reload).", parse_float)
    record: str = option("", "Record whole scheduling cycles (requests, answers, policy version) "
                         "into this directory for `policy-extender replay` (off when empty; see "
                         "docs/replay.md).", parse_str)
    record_sample: float = option(1.0, "Fraction of cycles recorded, decided once per session id "
                                  "so a cycle is recorded whole or not at all (0.1 = one in ten).",
                                  parse_float)
    record_max_bytes: int = option(1024 * MIB, "Size cap of the recording directory; the oldest "
                                   "cycles are deleted first (0: no cap).", parse_size)
    record_redact: tuple[str, ...] = option((), "Blank before writing: `annotations` (values, except "
                                            "the keys the policies read), `env` (container env "
                                            "values), or both comma-separated.", parse_redact)
    node_reuse_bytes: int = option(32 * MIB, "Memory each worker spends keeping predicate nodes decoded "
                                   "(the fields policies read, with a digest of the node's bytes), "
                                   "so a node sent again byte for byte (the same node for the next "
                                   "task of the cycle, and the task's prioritize) is not decoded "
                                   "again, nor by the next onSessionOpen; about 4 KB per node with "
                                   "the example policies, more when policies read pods' fields "
                                   "(docs/operations.md, Sizing). Each worker also keeps the jobs of "
                                   "its last onSessionOpen (~1 MB at 500 x 30) for the next one. 0: "
                                   "decode every node and job.", parse_size)
    huge_pages: bool = option(True, "Receive bodies of 32 MiB and more (snapshots, large prioritize "
                              "calls) into memory advised for transparent huge pages "
                              "(`MADV_HUGEPAGE`): 128 page faults for 256 MB instead of 65,536 "
                              "(received in 73 ms against 130 here; docs/operations.md, Sizing). "
                              "false: 4 KiB pages, for a host where huge page compaction stalls "
                              "or the slowest calls matter more than the median.", parse_bool)
    keep_body_maps: bool = option(True, "Keep the memory a body of 32 MiB and more was received into "
                                  "for the next body of about its size (a worker's last snapshot "
                                  "and its last large prioritize call; freed to the kernel under "
                                  "memory pressure, `MADV_FREE`): the next one is received without "
                                  "touching fresh memory, which cost up to 1 s per 256 MB on a "
                                  "virtual machine here (docs/operations.md, Sizing). false: "
                                  "unmap each body after its answer (RSS falls back between "
                                  "cycles).", parse_bool)
    tally: bool = option(True, "Keep the per-cycle decision tally that `GET /why` and `policy-extender "
                         "why` read (docs/operations.md, \"Why is it pending?\"): each worker adds "
                         "its calls in memory and flushes them to the session store in the "
                         "background; false: nothing is recorded.", parse_bool)
    tally_cycles: int = option(3, "Closed cycles whose tally the session store keeps, besides the "
                               "open one (the oldest beyond it is dropped).", parse_int)
    rules_not_called_cycles: int = option(3, "Closed Volcano cycles after which a rule whose verb Volcano has "
                                          "not called in any of them is reported (log, `/status` "
                                          "`rules_not_called`, metric `policy_extender_rules_not_called`): a "
                                          "`ready` rule without `extender.jobReadyVerb` in the conf decides "
                                          "nothing. At most `tally_cycles` (it reads the tally); 0: off.",
                                          parse_int)
    tally_max_entries: int = option(20000, "Cap of tally entries per cycle (one per task, job or "
                                    "queue and answer or rule; about 150 bytes each in the store), "
                                    "in the store and in each worker; entries beyond it are dropped "
                                    "and counted (`dropped_entries` in /why).", parse_int)
    tally_flush_seconds: float = option(1.0, "Seconds between two flushes of a worker's tally to "
                                        "the session store (> 0); /why lags the decisions by up to "
                                        "this.", parse_positive)
    certfile: str = option("", "TLS certificate (PEM) to serve HTTPS; needs `keyfile`. Volcano's "
                           "`extender.urlPrefix` then starts with https:// (docs/security.md).", parse_str)
    keyfile: str = option("", "TLS private key (PEM) for `certfile`.", parse_str)

    def __post_init__(self) -> None:
        if bool(self.certfile) != bool(self.keyfile):
            given, missing = ("certfile", "keyfile") if self.certfile else ("keyfile", "certfile")
            raise ConfigError(f"{given} is set but {missing} is not: HTTPS needs both "
                              f"(--certfile CERT.pem --keyfile KEY.pem), plain HTTP neither")
        self._check_paths_are_distinct()
        if self.ops_bind and _listener(self.ops_bind) == _listener(self.bind):
            raise ConfigError(f"ops_bind {self.ops_bind!r} is on the bind address's port ({self.bind!r}): give "
                              "the ops routes a port of their own (such as 0.0.0.0:8714), or leave "
                              "ops_bind empty to serve them on bind")
        if self.values_file and not self.values_file.endswith("values.yaml"):
            raise ConfigError(f"values_file {self.values_file}: a values file's name ends in values.yaml "
                              "(dev-values.yaml, prod-values.yaml), which is how a file of a set is known "
                              "as its values; rename it")

    def verb_paths(self) -> dict[str, str]:
        """URL path (with ``path_prefix``) -> Volcano verb kind (kube-scheduler's:
        :meth:`kube_scheduler_paths`)."""
        prefix = "/" + self.path_prefix.strip("/") if self.path_prefix.strip("/") else ""
        return {f"{prefix}/{self.verbs.get(kind, kind)}": kind for kind in VERB_KINDS}

    def kube_scheduler_paths(self) -> dict[str, str]:
        """URL path (with ``kube_scheduler_prefix``) -> kube-scheduler verb kind; empty when the
        prefix is."""
        if not self.kube_scheduler_prefix:
            return {}
        prefix = parse_path_prefix(self.kube_scheduler_prefix)
        return {f"{prefix}/{self.kube_scheduler_verb(kind)}": kind for kind in kube_scheduler.VERB_KINDS}

    def kube_scheduler_verb(self, kind: str) -> str:
        """The path segment of a kube-scheduler verb kind: its ``<name>Verb`` in the extender entry."""
        name = kube_scheduler.CONFIG_NAMES[kind]
        return self.kube_scheduler_verbs.get(name, name)

    def _check_paths_are_distinct(self) -> None:
        """No kube-scheduler verb at a Volcano verb's path (``path_prefix: /x`` with
        ``kube_scheduler_prefix: /x`` would give both protocols ``/x/prioritize``); the ops routes
        are one segment, which a kube-scheduler verb never is."""
        volcano = self.verb_paths()
        for path, kind in self.kube_scheduler_paths().items():
            if path in volcano:
                raise ConfigError(f"kube_scheduler_prefix {self.kube_scheduler_prefix!r} puts kube-scheduler's "
                                  f"{kube_scheduler.CONFIG_NAMES[kind]} verb at {path}, which Volcano's "
                                  f"{volcano[path]} verb already answers: choose another "
                                  "kube_scheduler_prefix (or rename one of them with "
                                  "kube_scheduler_verbs or verbs)")

    def body_limit_for(self, kind: str) -> int:
        return self.body_limits.get(kind, self.body_limit)


OPTIONS: tuple[dataclasses.Field, ...] = dataclasses.fields(Config)


def env_name(name: str) -> str:
    return ENV_PREFIX + name.upper()


def flag_name(name: str) -> str:
    return "--" + name.replace("_", "-")


# ---------------------------------------------------------------------------------------------
# loading


def load(flags: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None,
         config_file: str | None = None) -> Config:
    """The configuration from every source; ``flags`` holds only options given on the command line."""
    environ = os.environ if environ is None else environ
    config_file = config_file or environ.get(ENV_PREFIX + "CONFIG")
    values: dict[str, Any] = {}
    if config_file:
        values.update(read_yaml(config_file))
    values.update(read_environment(environ))
    values.update(parse_values(dict(flags or {}), lambda name: f"flag {flag_name(name)}"))
    return Config(**values)


def read_environment(environ: Mapping[str, str]) -> dict[str, Any]:
    given = {opt.name: environ[env_name(opt.name)] for opt in OPTIONS if env_name(opt.name) in environ}
    return parse_values(given, lambda name: f"environment variable {env_name(name)}")


def parse_values(given: Mapping[str, Any], where: Callable[[str], str]) -> dict[str, Any]:
    parsers = {opt.name: opt.metadata["parse"] for opt in OPTIONS}
    values = {}
    for name, raw in given.items():
        if raw is None:
            continue
        try:
            values[name] = parsers[name](raw)
        except ValueError as exc:
            raise ConfigError(f"{where(name)}: {exc}") from None
    return values


def read_yaml(path: str) -> dict[str, Any]:
    """Options from a YAML mapping of option names; errors point at file:line:col."""
    try:
        with open(path, encoding="utf-8") as stream:
            text = stream.read()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the configuration file ({exc.strerror}); "
                          "check the --config path") from None
    try:
        data = yaml.safe_load(text)
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f"{mark.line + 1}:{mark.column + 1}" if mark is not None else "1:1"
        raise ConfigError(f"{path}:{where}: invalid YAML: {exc.problem}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}:1:1: expected a mapping of option names (bind: ..., workers: ...)")
    assert node is not None  # the text that loaded to a mapping composes to its node
    return parse_values(_check_known(path, data, node), lambda name: _yaml_where(path, node, name))


def _check_known(path: str, data: dict, node: yaml.Node) -> dict:
    known = {opt.name for opt in OPTIONS}
    for key in data:
        if key not in known:
            raise ConfigError(f"{_yaml_where(path, node, key)}: unknown option {key!r}; "
                              f"the options are {', '.join(sorted(known))}")
    return data


def _yaml_where(path: str, node: yaml.Node, key: str) -> str:
    for key_node, _ in getattr(node, "value", ()):
        if getattr(key_node, "value", None) == key:
            mark = key_node.start_mark
            return f"{path}:{mark.line + 1}:{mark.column + 1}: {key}"
    return f"{path}: {key}"


# ---------------------------------------------------------------------------------------------
# documentation


def markdown_table() -> str:
    """The option table of docs/configuration.md."""
    rows = ["| option (YAML key) | flag | environment variable | default | meaning |",
            "|---|---|---|---|---|"]
    for opt in OPTIONS:
        rows.append(f"| `{opt.name}` | `{flag_name(opt.name)}` | `{env_name(opt.name)}` | "
                    f"{_shown_default(opt)} | {opt.metadata['help']} |")
    return "\n".join(rows) + "\n"


def _shown_default(opt: dataclasses.Field) -> str:
    if opt.metadata["shown"]:
        return opt.metadata["shown"]
    value = opt.default
    if isinstance(value, tuple):
        value = ",".join(value)
    if value == "":
        return "(none)"
    if opt.metadata["parse"] is parse_size:
        return f"`{value // MIB}MiB`"  # type: ignore[operator]  # a size's default is an int
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    return f"`{value}`"


if __name__ == "__main__":
    print(markdown_table(), end="")
