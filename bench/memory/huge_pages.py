"""Receiving a large body into a fresh anonymous map, in 4 KiB pages against transparent huge pages
(``MADV_HUGEPAGE``, what ``web.socket_body`` does for bodies of 32 MiB and more).

Method: a socketpair with 4 MiB buffers; a thread sends ``--mb`` MB (random bytes, made once);
this thread maps a fresh anonymous region of that size (advised or not), and ``recv_into`` it in
2 MiB steps with ``MSG_WAITALL`` as the service does (``_receive_waitall``), then unmaps it.
Rounds alternate the two kinds (4K, huge, huge, 4K, ...); each prints the wall time of the
receive (map included) and the receiving thread's system CPU time (``RUSAGE_THREAD``: page
faults and the kernel's copy). The medians of the rounds are printed; also the kernel's THP mode.

``python -m bench.memory.huge_pages [--mb 256] [--rounds 8]``
"""

from __future__ import annotations

import argparse
import mmap
import os
import resource
import socket
import statistics
import threading
import time
from pathlib import Path

STEP = 2 << 20


def receive_once(payload: bytes, huge: bool) -> tuple[float, float]:
    """(wall ms, receiving thread's system ms) of receiving ``payload`` into a fresh map."""
    a, b = socket.socketpair()
    for s in (a, b):
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    sender = threading.Thread(target=lambda: (b.sendall(payload), b.close()))
    size = len(payload)
    r0, w0 = resource.getrusage(resource.RUSAGE_THREAD), time.perf_counter()
    buffer = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    if huge:
        buffer.madvise(mmap.MADV_HUGEPAGE)
    sender.start()
    view, got = memoryview(buffer), 0
    while got < size:
        n = a.recv_into(view[got:got + STEP], min(STEP, size - got), socket.MSG_WAITALL)
        if not n:
            raise RuntimeError(f"the sender stopped after {got} bytes")
        got += n
    w1, r1 = time.perf_counter(), resource.getrusage(resource.RUSAGE_THREAD)
    view.release()
    sender.join()
    a.close()
    buffer.close()
    return (w1 - w0) * 1e3, (r1.ru_stime - r0.ru_stime) * 1e3


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.memory.huge_pages", description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=8, help="rounds of each kind")
    args = parser.parse_args(argv)
    if not hasattr(mmap, "MADV_HUGEPAGE"):
        raise SystemExit("this Python has no mmap.MADV_HUGEPAGE")
    mode = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    print(f"receive {args.mb} MB into a fresh anonymous map, 4 KiB pages against MADV_HUGEPAGE, "
          f"{args.rounds} rounds each, alternating; THP mode: {mode.read_text().strip() if mode.exists() else 'none'}; "
          f"load {open('/proc/loadavg').read().split()[0]}")
    payload = os.urandom(1 << 20) * args.mb
    rounds: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    for i in range(args.rounds):
        for huge in ((False, True) if i % 2 == 0 else (True, False)):
            rounds[huge].append(receive_once(payload, huge))
    for huge, rows in rounds.items():
        name = "huge pages" if huge else "4 KiB pages"
        print(f"  {name:12s} wall ms {[round(w) for w, _ in rows]}: median {statistics.median(w for w, _ in rows):.0f}; "
              f"system ms median {statistics.median(s for _, s in rows):.0f}")


if __name__ == "__main__":
    main()
