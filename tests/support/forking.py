"""What a function returns in a child made by ``os.fork`` (as gunicorn makes its workers).

One helper for every fork test, with a deadline: a child that deadlocks (a lock some other
thread held at the fork, SQLite's own mutexes among them) fails its test with the threads this
process had, instead of hanging the suite until CI's time runs out.
"""

from __future__ import annotations

import os
import select
import signal
import threading

DEADLINE_SECONDS = 60.0


def in_forked_child(run, deadline: float = DEADLINE_SECONDS) -> str:
    """``run()`` (which returns text) in a forked child of this process; the text it returned.
    Raises AssertionError if the child raised, or gave no answer within ``deadline`` seconds."""
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # the child: answer through the pipe and leave at once, whatever happens
        status = 1
        try:
            os.write(write, run().encode())
            status = 0
        finally:
            os._exit(status)
    os.close(write)
    threads = [t.name for t in threading.enumerate() if t is not threading.main_thread()]
    chunks = []
    waiting = select.poll()  # not select.select: it cannot take a descriptor above 1023, and a
    waiting.register(read, select.POLLIN)  # whole suite's run holds more than that open by then
    try:
        while True:
            if not waiting.poll(deadline * 1000):
                os.kill(child, signal.SIGKILL)
                raise AssertionError(f"the forked child gave no answer in {deadline:.0f} s (a deadlock?); "
                                     f"threads of the parent at the fork: {threads}")
            chunk = os.read(read, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(read)
        _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the forked child raised (its traceback is above)"
    return b"".join(chunks).decode()
