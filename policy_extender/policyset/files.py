"""The one reader of policy directories, and the one content hash of a policy set.

serve, check, test, eval, fmt, replay and configmap all read policy files here (``read_snapshot``,
``set_files``), so a set has one version whichever command reads it and wherever the ConfigMap is
mounted.

Which files make the policy set of a directory (docs/configuration.md, "Which files are the
policy set"): the files directly in it whose name ends in ``.policy`` and does not start with
``.``, symlinks followed (dangling ones skipped); in a ConfigMap volume, those of its ``..data``
payload. Never a subdirectory's: a subdirectory is a set of its own, read only when it is named
(``files_outside_set`` lists what a directory's set leaves out, for ``check`` to report). A set
with no file at all is a load error for ``serve`` unless ``allow_empty_policy_set`` is on.

A Kubernetes ConfigMap volume looks like this::

    zone.policy -> ..data/zone.policy
    ..data      -> ..2026_11_21_10_00_00.123/
    ..2026_11_21_10_00_00.123/zone.policy

The kubelet updates it by writing a new timestamped directory, renaming a ``..data_tmp`` symlink
over ``..data`` (atomic), then adding and removing the top-level ``name -> ..data/name`` links and
deleting the old directory. Only the ``..data`` target is ever complete: just after the rename a
new key has no top-level link yet and a removed key's link dangles. So when ``..data`` exists we
list and read the files of its resolved target, and read again if ``..data`` moved while we read.
A plain directory (a developer's checkout, a ``subPath`` mount) is listed directly, following
symlinks, and read again if any file's inode, size or mtime changed while we read.

Nothing here caches a path: every snapshot resolves the symlinks afresh, which is what makes
polling the fallback that always works. ``watch.DirectoryWatcher`` says when to read again.
"""

from __future__ import annotations

import errno
import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass

from policy_extender.lang.values import VALUES_SUFFIX

#: ConfigMap volumes point this link at the complete, current payload directory.
DATA_LINK = "..data"

#: How often a snapshot is read again when the directory changed under it.
MAX_READ_ATTEMPTS = 5


class ReadError(Exception):
    """A policy directory could not be read; the message says which and how to fix it."""


class ConcurrentUpdate(ReadError):
    """The directory kept changing while it was read; try again at the next poll."""


class DuplicateFile(ReadError):
    """Two directories of one set hold a policy file of the same name."""

    def __init__(self, name: str, first: str, second: str) -> None:
        super().__init__(f"{os.path.join(second, name)}: a policy file named {name!r} is also in "
                         f"{first}; rename one of them")
        self.name, self.first, self.second = name, first, second


@dataclass(frozen=True)
class PolicyFiles:
    """The policy files of every directory, read at one consistent moment."""

    #: {file name as shown in errors: raw bytes}
    files: dict[str, bytes]
    #: ``content_hash`` of the files: equal digests mean equal content; its first 16 hex
    #: characters are the policy set's version
    digest: str

    def sources(self) -> dict[str, str]:
        """The files decoded as UTF-8; raises ReadError naming the first undecodable one."""
        return {name: decode(name, data) for name, data in self.files.items()}


def decode(name: str, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        column = err.start - (data.rfind(b"\n", 0, err.start) + 1) + 1
        raise ReadError(
            f"{name}:{line}:{column}: byte {data[err.start]:#04x} is not UTF-8; "
            "save the policy file as UTF-8 text"
        ) from None


def read_snapshot(paths: list[str], suffixes: tuple[str, ...]) -> PolicyFiles:
    """Read every policy file of ``paths`` (directories, or single files).

    Files are named by their bare name, so a policy version (a hash of names and contents) is the
    same wherever the ConfigMap is mounted; the same name in two directories is an error
    (``DuplicateFile``).
    """
    files: dict[str, bytes] = {}
    origin: dict[str, str] = {}
    for path in paths:
        for name, data in read_path(path, suffixes).items():
            if name in files:
                raise DuplicateFile(name, origin[name], path)
            files[name], origin[name] = data, path
    return PolicyFiles(files, digest_of(files))


def read_path(path: str, suffixes: tuple[str, ...]) -> dict[str, bytes]:
    if os.path.isfile(path):  # a single file (e.g. a subPath mount, which never updates)
        check_inside(path, os.path.dirname(path) or ".")
        try:
            return {os.path.basename(path): read_file(path)}
        except FileNotFoundError:
            pass  # removed just now: reported below as missing
    if path.endswith(VALUES_SUFFIX) and not os.path.isdir(path):
        raise ReadError(f"{path}: the set's values file does not exist; create it, or name the "
                        "cluster's values file (--values FILE, or values_file in the serve config)")
    return read_directory(path, suffixes)


class OutsideDirectory(ReadError):
    """A policy file is a symbolic link to a file outside its directory: refused, never read."""


def inside(path: str, directory: str) -> bool:
    """Whether ``path``, every symlink resolved, is ``directory`` (resolved) or under it."""
    resolved, base = os.path.realpath(path), os.path.realpath(directory)
    return resolved == base or resolved.startswith(base.rstrip(os.sep) + os.sep)


def check_inside(path: str, directory: str, shown: str | None = None) -> None:
    """Raise ``OutsideDirectory`` when ``path`` resolves outside ``directory``. The message names
    the link (as ``shown``) and its directory, never where it points (nor anything of the file)."""
    if not inside(path, directory):
        raise OutsideDirectory(
            f"{shown or path}: a symbolic link to a file outside {directory}: refused, not read; put the "
            "policy file itself in the directory (a ConfigMap volume's links into its ..data are fine)")


def digest_of(files: Mapping[str, bytes | str]) -> str:
    """The content hash of a policy set, {file name: bytes or text}: sha256 over the sorted names
    and contents, each length-prefixed (text counts as its UTF-8 bytes)."""
    digest = hashlib.sha256()
    for name in sorted(files):
        for part in (name, files[name]):
            data = part.encode("utf-8") if isinstance(part, str) else part
            digest.update(len(data).to_bytes(8, "big") + data)
    return digest.hexdigest()


def version_of(files: Mapping[str, bytes | str]) -> str:
    """A policy set's version: the first 16 hex characters of its content hash."""
    return digest_of(files)[:16]


def read_directory(directory: str, suffixes: tuple[str, ...]) -> dict[str, bytes]:
    """One directory's policy files, read again while it changes under us."""
    if not os.path.isdir(directory):
        raise ReadError(
            f"{directory}: policy directory does not exist or is not a directory; mount the "
            "policy ConfigMap there or point the service at the right directory"
        )
    for _ in range(MAX_READ_ATTEMPTS):
        files = read_directory_once(directory, suffixes)
        if files is not None:
            return files
    raise ConcurrentUpdate(f"{directory}: kept changing during {MAX_READ_ATTEMPTS} reads")


def read_directory_once(directory: str, suffixes: tuple[str, ...]) -> dict[str, bytes] | None:
    """The files, or None when the directory changed while they were read."""
    target = data_target(directory)
    root = target or directory
    before = signature(root, suffixes, directory)
    try:
        files = {name: read_file(os.path.join(root, name)) for name in before}
    except FileNotFoundError:
        return None  # the old timestamped directory was deleted while we read it
    except OSError as err:
        if err.errno == errno.ELOOP:  # a file became a symlink after it was listed: list again
            return None
        raise
    if data_target(directory) != target or signature(root, suffixes, directory) != before:
        return None
    return files


def data_target(directory: str) -> str | None:
    """The resolved directory ``..data`` points at, or None outside a ConfigMap volume."""
    link = os.path.join(directory, DATA_LINK)
    if not os.path.lexists(link):
        return None
    check_inside(link, directory)  # the kubelet's points at a sibling ``..2026_…`` directory
    return os.path.realpath(link)


def signature(root: str, suffixes: tuple[str, ...],
              directory: str | None = None) -> dict[str, tuple[int, int, int, int]]:
    """{policy file name: (device, inode, size, mtime)} of the visible files under ``root``.

    Hidden entries (``..data``, ``..2026_…``, editor swap files) are skipped; symlinks are followed
    and dangling ones skipped (a key the kubelet is removing). A file that resolves outside
    ``directory`` (the policy directory ``root`` belongs to; ``root`` itself when None) raises
    ``OutsideDirectory``: a link such as ``zone.policy -> /etc/shadow`` is never read.
    """
    found = {}
    try:
        entries = list(os.scandir(root))
    except FileNotFoundError:
        return {}
    for entry in entries:
        if entry.name.startswith(".") or not entry.name.endswith(suffixes):
            continue
        try:
            st = os.stat(entry.path)  # follows symlinks, fresh every time
        except FileNotFoundError:
            continue
        if os.path.isfile(entry.path):
            check_inside(entry.path, directory or root, shown=os.path.join(directory or root, entry.name))
            found[entry.name] = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    return found


def set_files(directory: str, suffixes: tuple[str, ...]) -> dict[str, str]:
    """{file name: path} of the files that make the policy set of ``directory`` (the rule in the
    module docstring), sorted by name; a ConfigMap volume's are the paths in its payload."""
    root = data_target(directory) or directory
    return {name: os.path.join(root, name) for name in sorted(signature(root, suffixes, directory))}


def files_outside_set(directory: str, suffixes: tuple[str, ...]) -> list[str]:
    """The policy files under ``directory`` that its set does not hold: those in its visible
    subdirectories, at any depth (hidden ones, such as a ConfigMap's ``..2026_…`` payloads, are
    not looked into). Paths as found, sorted."""
    found = []
    for parent, subdirectories, names in os.walk(directory):
        subdirectories[:] = sorted(d for d in subdirectories if not d.startswith("."))
        if os.path.samefile(parent, directory):
            continue
        found += [os.path.join(parent, name) for name in names
                  if name.endswith(suffixes) and not name.startswith(".") and os.path.isfile(os.path.join(parent, name))]
    return sorted(found)


def read_file(path: str) -> bytes:
    """The file's bytes, opened by its resolved path with ``O_NOFOLLOW``: a file swapped for a
    symlink after it was checked raises ``ELOOP`` instead of being followed."""
    fd = os.open(os.path.realpath(path), os.O_RDONLY | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as f:
        return f.read()
