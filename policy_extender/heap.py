"""Keep large buffers out of glibc's heap, so a worker's RSS stays flat over time.

glibc serves a ``malloc`` of 128 KiB or more with its own ``mmap`` and unmaps it at ``free``, but
its threshold is *dynamic*: freeing such a block raises the threshold to the block's size (up to
32 MiB on 64-bit). After the first 18 MB onSessionOpen body (or a 6.7 MB prioritize body) is
freed, the next ones come from the heap: from the arena of whichever gthread thread read them,
and glibc keeps a freed arena chunk for reuse instead of giving it back. With 4 threads per
worker (each with its own arena), every thread ends up holding its own copy of the largest bodies
it has read: measured with ``python -m bench.memory.served`` (whole cycles of 50 nodes x 20 pods, a
policy swap every second), each worker grew from 40 to 130 MiB in steps of one snapshot buffer.

``bound_large_allocations()`` sets ``M_MMAP_THRESHOLD`` once per process (it also switches the
dynamic adjustment off), so every allocation from ``LARGE`` bytes up is mapped and returned to the
kernel when freed, whichever thread made it. Allocations under it (a predicate body, the objects
a decode makes) stay on the heap as before. The cost is the page faults of mapping such a buffer
afresh each time (about 2 ms for a 6.7 MB body here). On a C library other than glibc (musl)
this does nothing and says so.

``bound_arenas()`` caps the number of malloc arenas of a process at ``ARENA_MAX`` (glibc's default
is 8 per core): each gthread thread otherwise gets an arena of its own, and what it frees stays
there for that thread, so a worker's small allocations spread over 5 heaps that each keep their
freed chunks. Measured side by side (``python -m bench.memory.served --minutes 10``, two servers at
once): with ``MALLOC_ARENA_MAX=2`` the pod grew +0.04 MiB/min over minutes 5-10 (148.0 to 148.1
MiB) against +0.12 (152.1 to 152.7) with glibc's default. The GIL keeps the threads from
allocating at the same moment most of the time, so they rarely wait on an arena's lock. An
operator's own ``MALLOC_ARENA_MAX`` in the environment wins (glibc read it at start).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os

log = logging.getLogger(__name__)

#: bytes: allocations of this size and more are always mmapped and unmapped at free
LARGE = 1 << 20
#: malloc arenas per process (the main one included)
ARENA_MAX = 2
#: mallopt parameter numbers (glibc malloc.h)
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, M_ARENA_MAX = -1, -3, -8

_done: int | None = None


def _libc():
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.mallopt  # noqa: B018 - glibc only
        libc.gnu_get_libc_version  # noqa: B018 - glibc only: probes that it is glibc
    except (OSError, AttributeError):
        return None
    libc.mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    return libc


def bound_large_allocations(threshold: int = LARGE) -> bool:
    """Allocations of ``threshold`` bytes and more are mmapped from now on (this process and the
    ones it forks); False when the C library is not glibc (nothing changed)."""
    global _done
    if _done == threshold:
        return True
    libc = _libc()
    if libc is None:
        log.info("not glibc: large allocations keep the C library's own policy")
        return False
    if not libc.mallopt(M_MMAP_THRESHOLD, threshold):
        return False
    _done = threshold
    return True


def bound_arenas(count: int = ARENA_MAX) -> bool:
    """At most ``count`` malloc arenas in this process and the ones it forks, for the threads
    that make their first allocation from now on; False when the C library is not glibc or the
    environment sets ``MALLOC_ARENA_MAX`` (then that value stands)."""
    if "MALLOC_ARENA_MAX" in os.environ:
        return False
    libc = _libc()
    if libc is None:
        return False
    return bool(libc.mallopt(M_ARENA_MAX, count))


class MallocInfo(ctypes.Structure):
    """glibc's ``struct mallinfo2`` (2.33+): what the heap holds, for tests and diagnostics."""

    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
                 "fordblks", "keepcost")]


def malloc_info() -> MallocInfo | None:
    """``mallinfo2()`` of this process (main arena's heap in ``arena``, mmapped blocks in
    ``hblks``/``hblkhd``), or None where the C library has no ``mallinfo2``."""
    libc = _libc()
    if libc is None or not hasattr(libc, "mallinfo2"):
        return None
    libc.mallinfo2.restype = MallocInfo
    return libc.mallinfo2()
