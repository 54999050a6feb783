"""SqliteStore: the embedded session store shared by the gunicorn workers of one pod.

One SQLite file in WAL mode (readers never block the writer), ``synchronous=NORMAL`` (per-cycle
state need not survive a power cut), a busy timeout so concurrent writers queue instead of
failing. Each process opens its own connection lazily, after fork (a connection inherited
through fork must never be used), and each thread its own, so threads read concurrently.

The default file (``sqlite:``) is private to one instance: it lives in the instance's runtime
directory (``policy_extender.instance``), on ``/dev/shm`` when it is writable: tmpfs is fast, and
nothing survives a pod restart, which is right for state that lives one scheduling cycle.

The file itself may be deleted or replaced under a running service (tmpfs cleaned, a volume
remounted): the processes that have it open would go on with the old inode while a process that
starts later creates a new file, and the workers would decide from different sessions. So a
process compares the path's device and inode with those of the file it has open on every write,
on every head query and, through the head watch, at least every ``CHECK_SECONDS``; when they
differ it logs it, retires its connections (kept, never closed: see ``head_watch``) and connects
to the file the path names now. A worker whose session was in the old file then finds it gone
and answers 5xx (``SessionCache``) until a new onSessionOpen.

Expiry (``session_ttl``) is measured on the host's boot clock (``CLOCK_BOOTTIME``, the same in
every process of the host, never stepped: counts suspended time too), not the wall clock: a
wall-clock step past the TTL mid-cycle (an NTP correction, a VM resumed) must not make the cycle's
session look expired and every worker decide without it. A head row carries the boot it was
written in (``/proc/sys/kernel/random/boot_id``); a row from another boot (an explicit
``sqlite:PATH`` on a disk that outlived a reboot) has expired.

The schema carries a version (``PRAGMA user_version``): a file made by another version of the
service is emptied and rebuilt (it only ever holds one cycle's state).
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from policy_extender import process
from policy_extender.instance import STORE_FILE as DEFAULT_FILE_NAME
from policy_extender.instance import process_runtime_dir
from policy_extender.session.store import (DEFAULT_TTL_SECONDS, ENDED_KEPT, Change, Head, OpenSuperseded,
                                           SessionCounts, StoreOptions, new_session_id, new_tip)

log = logging.getLogger("policy_extender.session")

#: seconds between two checks that the path still names the file this process has open
CHECK_SECONDS = 0.25
#: ``PRAGMA user_version`` of the schema below; a file with another one is rebuilt
SCHEMA_VERSION = 6
_TABLES = ("arrival", "lost", "head", "snapshot", "allocation", "change", "ended", "policy_version", "policy_source",
           "session_count", "tally_cycle", "tally_count", "tally_note")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS lost (
    one INTEGER PRIMARY KEY CHECK (one = 1), session_id TEXT NOT NULL, boot_id TEXT NOT NULL,
    until REAL NOT NULL);
CREATE TABLE IF NOT EXISTS arrival (
    one INTEGER PRIMARY KEY CHECK (one = 1), issued INTEGER NOT NULL, applied INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS head (
    one INTEGER PRIMARY KEY CHECK (one = 1),
    session_id TEXT NOT NULL, seq INTEGER NOT NULL, policy_version TEXT NOT NULL,
    opened_at REAL NOT NULL, expires_at REAL NOT NULL, boot_id TEXT NOT NULL, tip TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS snapshot (session_id TEXT PRIMARY KEY, data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS allocation (
    session_id TEXT NOT NULL, task_uid TEXT NOT NULL, net INTEGER NOT NULL, last TEXT NOT NULL,
    record BLOB NOT NULL, PRIMARY KEY (session_id, task_uid)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS change (
    session_id TEXT NOT NULL, seq INTEGER NOT NULL, task_uid TEXT NOT NULL, net INTEGER NOT NULL,
    record BLOB NOT NULL, tip TEXT NOT NULL, PRIMARY KEY (session_id, seq)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS ended (
    n INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL, how TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS policy_version (version TEXT PRIMARY KEY) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS policy_source (
    version TEXT NOT NULL, file TEXT NOT NULL, text TEXT NOT NULL,
    PRIMARY KEY (version, file)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS session_count (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS tally_cycle (
    cycle_id TEXT PRIMARY KEY, opened_at REAL NOT NULL, dropped INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS tally_count (
    cycle_id TEXT NOT NULL, key TEXT NOT NULL, n INTEGER NOT NULL, PRIMARY KEY (cycle_id, key)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS tally_note (
    cycle_id TEXT NOT NULL, key TEXT NOT NULL, text TEXT NOT NULL, PRIMARY KEY (cycle_id, key)) WITHOUT ROWID;
"""


def session_clock() -> float:
    """Seconds on the host's boot clock: what ``expires_at`` is measured on (module docstring)."""
    return time.clock_gettime(time.CLOCK_BOOTTIME)


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as stream:
            return stream.read().strip()
    except OSError:
        return ""


#: this boot of the host; a head row written in another one has expired
BOOT_ID = _boot_id()
#: the condition "the head row ``h`` is live", with its parameters from :func:`_live`
_LIVE = "h.boot_id = ? AND h.expires_at > ?"


def _live() -> tuple[str, float]:
    return BOOT_ID, session_clock()


def default_path() -> str:
    """``<runtime dir>/sessions.sqlite3``: the instance's own file (``serve`` resolves ``sqlite:``
    to it in the master), or, outside ``serve``, one private to this process (instance.py)."""
    return os.path.join(process_runtime_dir(), DEFAULT_FILE_NAME)


class SqliteStore:
    """The session store in one SQLite file (see the module docstring); a
    ``session.store.SessionStore``, whose docstrings say what each method does."""

    def __init__(self, path: str | None = None, ttl_seconds: float = DEFAULT_TTL_SECONDS,
                 busy_timeout_seconds: float = 10.0) -> None:
        self.path = path or default_path()
        self.ttl_seconds = ttl_seconds
        self.busy_timeout_seconds = busy_timeout_seconds
        self._local = threading.local()
        self._retired: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        #: (pid, device, inode) of the file this process's connections have open
        self._file: tuple[int, int, int] | None = None
        #: bumped each time this process moves to the file the path names now
        self.generation = 0
        self.replacements = 0

    @classmethod
    def from_setting(cls, setting: str, options: StoreOptions) -> SqliteStore:
        """``sqlite:PATH``, or ``sqlite:`` for the default file (``default_path``)."""
        return cls(setting[len("sqlite:"):] or None, ttl_seconds=options.ttl_seconds)

    def __reduce__(self):
        # A store travels to spawned processes as its settings; each process connects itself.
        return (SqliteStore, (self.path, self.ttl_seconds, self.busy_timeout_seconds))

    # -- connections ---------------------------------------------------------------------------

    def _conn(self) -> sqlite3.Connection:
        """This thread's connection, made on first use in this process (a fork changes the pid)
        and again after the process moved to a replaced file."""
        local = self._local
        if getattr(local, "key", None) != (process.pid, self.generation):
            if getattr(local, "conn", None) is not None:
                # Inherited through fork, or of a replaced file: never use it, never close it
                # (closing drops this process's POSIX locks on the file); keep a reference so
                # the garbage collector does not close it either.
                self._retired.append(local.conn)
            local.conn = self._connect()
            local.key = (process.pid, self.generation)
        return local.conn

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=self.busy_timeout_seconds,
                               isolation_level=None, check_same_thread=False)
        conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_seconds * 1000)}")
        conn.execute("PRAGMA synchronous = NORMAL")
        _retry_while_locked(lambda: _prepare(conn), self.busy_timeout_seconds)
        with self._lock:
            if self._file is None or self._file[0] != process.pid:
                info = os.stat(self.path)
                self._file = (process.pid, info.st_dev, info.st_ino)
        return conn

    def check_file(self) -> bool:
        """Whether the path still names the file this process has open. If not, log it and make
        every thread connect again, to the file the path names now (see the module docstring)."""
        known = self._file
        if known is None or known[0] != process.pid:
            return True
        try:
            info = os.stat(self.path)
            now: tuple[int, int] | None = (info.st_dev, info.st_ino)
        except FileNotFoundError:
            now = None
        if now == known[1:]:
            return True
        with self._lock:
            if self._file is known:
                self._file = None
                self.generation += 1
                self.replacements += 1
                log.warning("session store %s was %s under this process: the session it held is "
                            "lost; reconnecting to the file the path names now (the workers "
                            "agree again from the next onSessionOpen)", self.path,
                            "deleted" if now is None else "replaced")
        return False

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """A write transaction that takes the write lock up front (no lock upgrade deadlocks)."""
        self.check_file()
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:  # SQLITE_FULL may have rolled it back already
                conn.execute("ROLLBACK")
            raise

    # -- session lifecycle ---------------------------------------------------------------------

    def begin_open(self) -> int:
        with self._write() as conn:
            issued, _ = _arrival(conn)
            conn.execute("UPDATE arrival SET issued = ?", (issued + 1,))
        return issued + 1

    def open(self, snapshot: bytes, policy_version: str, policy_sources: dict[str, str],
             ticket: int | None = None) -> str:
        try:
            return self._open(snapshot, policy_version, policy_sources, ticket)
        except sqlite3.Error:
            self._end_after_failed_open(ticket)
            raise

    def _end_after_failed_open(self, ticket: int | None) -> None:
        """An open that could not be stored (the disk is full, an I/O error) must not leave the
        previous cycle's session current: Volcano has moved on to a new cycle, so end it, in a
        transaction of its own. A few pages, written over the WAL frames the failed open had
        appended (the file keeps its size), so it succeeds on a full disk; if it fails too, the
        error is logged and the open's error answered."""
        try:
            with self._write() as conn:
                _apply_arrival(conn, ticket, "onSessionOpen")
                self._end_current(conn, ended_normally="replaced")
        except OpenSuperseded:
            pass  # a later open or close was stored: the session current now is that cycle's
        except sqlite3.Error as error:
            log.error("session store %s: an onSessionOpen could not be stored, and ending the previous "
                      "session failed too (%s): its calls may decide with the previous cycle's session "
                      "until the next onSessionOpen is stored", self.path, error)

    def _open(self, snapshot: bytes, policy_version: str, policy_sources: dict[str, str],
              ticket: int | None) -> str:
        session_id, now = new_session_id(), time.time()
        with self._write() as conn:
            _apply_arrival(conn, ticket, "onSessionOpen")
            self._end_current(conn, ended_normally="replaced")
            conn.execute("INSERT INTO head VALUES (1, ?, 0, ?, ?, ?, ?, '')",
                         (session_id, policy_version, now, session_clock() + self.ttl_seconds, BOOT_ID))
            conn.execute("INSERT INTO snapshot VALUES (?, ?)", (session_id, snapshot))
            _store_sources(conn, policy_version, policy_sources)
            _forget_other_sources(conn, policy_version)
            _count(conn, "opened")
        return session_id

    def close(self) -> None:
        with self._write() as conn:
            _apply_arrival(conn, None, "onSessionClose")
            self._end_current(conn, ended_normally="closed")

    def _end_current(self, conn: sqlite3.Connection, ended_normally: str) -> None:
        """Drop the current session and everything it holds, counting how it ended; a lost
        session's record (``mark_lost``) goes too: this is the next cycle."""
        conn.execute("DELETE FROM lost")
        row = conn.execute(f"SELECT session_id, {_LIVE} FROM head h", _live()).fetchone()
        if row is None:
            return
        how = ended_normally if row[1] else "expired"
        _count(conn, how)
        conn.execute("INSERT INTO ended (session_id, how) VALUES (?, ?)", (row[0], how))
        conn.execute("DELETE FROM ended WHERE n <= (SELECT max(n) FROM ended) - ?", (ENDED_KEPT,))
        conn.execute("DELETE FROM head")
        conn.execute("DELETE FROM snapshot")
        conn.execute("DELETE FROM allocation")
        conn.execute("DELETE FROM change")

    # -- reads ---------------------------------------------------------------------------------

    def head(self) -> Head | None:
        return self.head_until()[0]

    def head_until(self) -> tuple[Head | None, float]:
        """The head, and when it expires on :func:`session_clock` (inf with no session)."""
        self.check_file()
        row = self._conn().execute(
            f"SELECT session_id, seq, policy_version, opened_at, tip, expires_at FROM head h WHERE {_LIVE}",
            _live()).fetchone()
        return (Head(*row[:5]), row[5]) if row else (None, float("inf"))

    def snapshot(self, session_id: str) -> bytes | None:
        row = self._conn().execute(
            "SELECT s.data FROM snapshot s JOIN head h USING (session_id)"
            f" WHERE s.session_id = ? AND {_LIVE}", (session_id, *_live())).fetchone()
        return row[0] if row else None

    def allocations(self, session_id: str) -> list[tuple[int, bytes]]:
        rows = self._conn().execute(
            "SELECT a.net, a.record FROM allocation a JOIN head h USING (session_id)"
            f" WHERE a.session_id = ? AND {_LIVE} AND a.net != 0", (session_id, *_live()))
        return [(net, record) for net, record in rows]

    def changes(self, session_id: str, after_seq: int) -> list[Change]:
        rows = self._conn().execute(
            "SELECT c.task_uid, c.net, c.record, c.tip FROM change c JOIN head h USING (session_id)"
            f" WHERE c.session_id = ? AND c.seq > ? AND {_LIVE} ORDER BY c.seq",
            (session_id, after_seq, *_live())).fetchall()
        return [Change(*row) for row in rows]

    def ended(self, session_id: str) -> bool:
        conn = self._conn()
        if conn.execute("SELECT 1 FROM ended WHERE session_id = ?", (session_id,)).fetchone() is not None:
            return True
        return conn.execute(f"SELECT 1 FROM head h WHERE session_id = ? AND NOT ({_LIVE})",
                            (session_id, *_live())).fetchone() is not None  # expired, nothing noticed it yet

    def policy_sources(self, version: str) -> dict[str, str] | None:
        rows = self._conn().execute(
            "SELECT s.file, s.text FROM policy_version v"
            " LEFT JOIN policy_source s ON s.version = v.version WHERE v.version = ?",
            (version,)).fetchall()
        if not rows:
            return None
        return {file: text for file, text in rows if file is not None}

    def mark_lost(self, session_id: str, seconds: float) -> None:
        with self._write() as conn:
            conn.execute("INSERT OR REPLACE INTO lost VALUES (1, ?, ?, ?)",
                         (session_id, BOOT_ID, session_clock() + seconds))

    def lost(self) -> str | None:
        row = self._conn().execute("SELECT session_id FROM lost h WHERE boot_id = ? AND until > ?",
                                   _live()).fetchone()
        return row[0] if row else None

    def session_counts(self) -> SessionCounts:
        rows = self._conn().execute("SELECT name, value FROM session_count").fetchall()
        return SessionCounts(**dict(rows))

    # -- this cycle's events -------------------------------------------------------------------

    def allocate(self, session_id: str, task_uid: str, record: bytes) -> bool:
        return self._event(session_id, task_uid, record, "+")

    def deallocate(self, session_id: str, task_uid: str, record: bytes) -> bool:
        return self._event(session_id, task_uid, record, "-")

    def _event(self, session_id: str, task_uid: str, record: bytes, kind: str) -> bool:
        """One allocate (``+``) or deallocate (``-``) event, counted net (store.py)."""
        with self._write() as conn:
            if not _is_current(conn, session_id):
                return False
            row = conn.execute("SELECT net, last FROM allocation WHERE session_id = ? AND task_uid = ?",
                               (session_id, task_uid)).fetchone()
            net, last = row if row else (0, "")
            if last == kind == "-":
                return True  # a retried deallocate changes nothing
            if last != kind:
                net += 1 if kind == "+" else -1
            tip = new_tip()
            conn.execute("INSERT OR REPLACE INTO allocation VALUES (?, ?, ?, ?, ?)",
                         (session_id, task_uid, net, kind, record))
            conn.execute("UPDATE head SET seq = seq + 1, tip = ? WHERE session_id = ?", (tip, session_id))
            conn.execute("INSERT INTO change SELECT session_id, seq, ?, ?, ?, ? FROM head",
                         (task_uid, net, record, tip))
            return True

    # -- the decision tally (session/tally.py) --------------------------------------------------

    def tally_merge(self, cycle_id: str, opened_at: float, counts: dict[str, int],
                    firsts: dict[str, str], lasts: dict[str, str], dropped: int, keep: int,
                    max_entries: int) -> list[str] | None:
        with self._write() as conn:
            if conn.execute("SELECT 1 FROM tally_cycle WHERE cycle_id = ?", (cycle_id,)).fetchone() is None:
                kept = conn.execute("SELECT opened_at FROM tally_cycle ORDER BY opened_at DESC LIMIT ?",
                                    (keep,)).fetchall()
                if len(kept) >= keep and opened_at < kept[-1][0]:
                    return None
                conn.execute("INSERT INTO tally_cycle VALUES (?, ?, 0)", (cycle_id, opened_at))
                for (old,) in conn.execute("SELECT cycle_id FROM tally_cycle ORDER BY opened_at DESC"
                                           " LIMIT -1 OFFSET ?", (keep,)).fetchall():
                    for table in ("tally_cycle", "tally_count", "tally_note"):
                        conn.execute(f"DELETE FROM {table} WHERE cycle_id = ?", (old,))
            entries = _tally_entries(conn, cycle_id)
            new: list[str] = []
            if entries + len(counts) + len(firsts) + len(lasts) <= max_entries:
                conn.executemany("INSERT INTO tally_count VALUES (?, ?, ?) ON CONFLICT (cycle_id, key)"
                                 " DO UPDATE SET n = n + excluded.n",
                                 [(cycle_id, k, n) for k, n in counts.items()])
                conn.executemany("INSERT OR REPLACE INTO tally_note VALUES (?, ?, ?)",
                                 [(cycle_id, k, text) for k, text in lasts.items()])
                for k, text in firsts.items():
                    if conn.execute("INSERT OR IGNORE INTO tally_note VALUES (?, ?, ?)",
                                    (cycle_id, k, text)).rowcount:
                        new.append(k)
            else:  # near the cap: entry by entry
                for k, n in counts.items():
                    if conn.execute("UPDATE tally_count SET n = n + ? WHERE cycle_id = ? AND key = ?",
                                    (n, cycle_id, k)).rowcount:
                        continue
                    if entries < max_entries:
                        conn.execute("INSERT INTO tally_count VALUES (?, ?, ?)", (cycle_id, k, n))
                        entries += 1
                    else:
                        dropped += 1
                for k, text, first in [(k, t, True) for k, t in firsts.items()] + \
                                      [(k, t, False) for k, t in lasts.items()]:
                    exists = conn.execute("SELECT 1 FROM tally_note WHERE cycle_id = ? AND key = ?",
                                          (cycle_id, k)).fetchone() is not None
                    if exists:
                        if not first:
                            conn.execute("UPDATE tally_note SET text = ? WHERE cycle_id = ? AND key = ?",
                                         (text, cycle_id, k))
                    elif entries < max_entries:
                        conn.execute("INSERT INTO tally_note VALUES (?, ?, ?)", (cycle_id, k, text))
                        entries += 1
                        if first:
                            new.append(k)
                    else:
                        dropped += 1
            if dropped:
                conn.execute("UPDATE tally_cycle SET dropped = dropped + ? WHERE cycle_id = ?",
                             (dropped, cycle_id))
            return new

    def tally_cycles(self) -> list[tuple[str, float, int]]:
        return [tuple(row) for row in self._conn().execute(
            "SELECT cycle_id, opened_at, dropped FROM tally_cycle ORDER BY opened_at DESC")]

    def tally_read(self, cycle_id: str, prefix: str) -> tuple[dict[str, int], dict[str, str]]:
        end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        conn = self._conn()
        counts = dict(conn.execute("SELECT key, n FROM tally_count WHERE cycle_id = ? AND key >= ?"
                                   " AND key < ?", (cycle_id, prefix, end)).fetchall())
        notes = dict(conn.execute("SELECT key, text FROM tally_note WHERE cycle_id = ? AND key >= ?"
                                  " AND key < ?", (cycle_id, prefix, end)).fetchall())
        return counts, notes


def open_session_in(path: str) -> tuple[str, float] | None:
    """(session id, seconds left) of the session open in the SQLite store file ``path`` of
    another process, read-only; None when none is, it expired, or the file cannot be read (another
    schema version, not a store)."""
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1.0)
    except sqlite3.Error:
        return None
    try:
        row = conn.execute(f"SELECT session_id, expires_at FROM head h WHERE {_LIVE}", _live()).fetchone()
    except sqlite3.Error:
        return None
    finally:
        conn.close()  # a file of another instance: this process holds no lock of its own on it
    return (row[0], row[1] - session_clock()) if row else None


def _tally_entries(conn: sqlite3.Connection, cycle_id: str) -> int:
    return sum(conn.execute(f"SELECT count(*) FROM {table} WHERE cycle_id = ?", (cycle_id,)).fetchone()[0]
               for table in ("tally_count", "tally_note"))


def _prepare(conn: sqlite3.Connection) -> None:
    """Switch the file to WAL (once per file) and create the tables, rebuilding a file whose
    schema is another version's (it holds one cycle's state only)."""
    if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
        conn.execute("PRAGMA journal_mode = WAL")
    if conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION:
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        if conn.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
            for table in _TABLES:
                conn.execute(f"DROP TABLE IF EXISTS {table}")
            for statement in filter(str.strip, _SCHEMA.split(";")):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _retry_while_locked(step, timeout_seconds: float) -> None:
    """Run ``step`` until it does not fail with "database is locked". Needed when many workers
    open a fresh file at once: switching the journal mode does not wait on the busy timeout."""
    deadline = time.monotonic() + timeout_seconds
    while True:
        try:
            return step()
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.005)


def _is_current(conn: sqlite3.Connection, session_id: str) -> bool:
    return conn.execute(f"SELECT 1 FROM head h WHERE session_id = ? AND {_LIVE}",
                        (session_id, *_live())).fetchone() is not None


def _arrival(conn: sqlite3.Connection) -> tuple[int, int]:
    """(the last ticket issued, the ticket of the last open or close stored)."""
    row = conn.execute("SELECT issued, applied FROM arrival").fetchone()
    if row is None:
        conn.execute("INSERT INTO arrival VALUES (1, 0, 0)")
        return 0, 0
    return row[0], row[1]


def _apply_arrival(conn: sqlite3.Connection, ticket: int | None, what: str) -> None:
    """Store an open or close with ``ticket`` (None: a new one, it arrived now), unless one that
    arrived after it was stored first (OpenSuperseded). The issued counter never falls behind a
    ticket stored (a ticket taken before the file was replaced)."""
    issued, applied = _arrival(conn)
    if ticket is None:
        ticket = issued + 1
    if ticket < applied:
        raise OpenSuperseded(f"{what} arrived before the onSessionOpen or onSessionClose stored last "
                             f"(arrival {ticket} < {applied}): not stored, the later cycle's session stays")
    conn.execute("UPDATE arrival SET issued = ?, applied = ?", (max(issued, ticket), ticket))


def _store_sources(conn: sqlite3.Connection, version: str, sources: dict[str, str]) -> None:
    """Store a policy version's files once; a version is a content hash, so never rewritten."""
    if conn.execute("INSERT OR IGNORE INTO policy_version VALUES (?)", (version,)).rowcount:
        conn.executemany("INSERT INTO policy_source VALUES (?, ?, ?)",
                         [(version, file, text) for file, text in sources.items()])


def _forget_other_sources(conn: sqlite3.Connection, version: str) -> None:
    """Only the open session's version is ever asked for (a worker compiling the set the session
    is pinned to); the replaced session's went with it. Without this a policy swapped every
    second added a version's files to the store at every open, for ever."""
    conn.execute("DELETE FROM policy_source WHERE version != ?", (version,))
    conn.execute("DELETE FROM policy_version WHERE version != ?", (version,))


def _count(conn: sqlite3.Connection, name: str) -> None:
    conn.execute("INSERT INTO session_count VALUES (?, 1)"
                 " ON CONFLICT (name) DO UPDATE SET value = value + 1", (name,))
