"""Mapped bodies (32 MiB and more) are advised for transparent huge pages unless ``huge_pages`` is
false; read from the kernel's own view of the mapping (``VmFlags`` ``hg`` in /proc/self/smaps)."""

import mmap
import re
from pathlib import Path

import pytest

from policy_extender.config import Config
from policy_extender.web import create_app, socket_body

pytestmark = pytest.mark.skipif(not Path("/sys/kernel/mm/transparent_hugepage").exists()
                                or not hasattr(mmap, "MADV_HUGEPAGE"),
                                reason="this kernel has no transparent huge pages")


def _vm_flags(buffer: mmap.mmap) -> set[str]:
    """The VmFlags of the mapping that holds ``buffer`` (found by its size and first byte's address)."""
    import ctypes
    address = ctypes.addressof(ctypes.c_char.from_buffer(buffer))
    for block in re.split(r"\n(?=[0-9a-f]+-[0-9a-f]+ )", Path("/proc/self/smaps").read_text()):
        start, end = (int(x, 16) for x in block.split(" ", 1)[0].split("-"))
        if start <= address < end:
            return set(re.search(r"^VmFlags: (.*)$", block, re.M).group(1).split())  # type: ignore[union-attr]  # every mapping has one
    raise AssertionError("the buffer's mapping is not in /proc/self/smaps")


@pytest.fixture
def restore():
    yield
    socket_body.configure(True)


def test_a_mapped_body_is_advised_for_huge_pages_by_default(restore):
    socket_body.configure(Config().huge_pages)
    buffer = socket_body._buffer(socket_body.MAPPED_FROM)
    assert type(buffer) is mmap.mmap
    assert "hg" in _vm_flags(buffer)
    buffer.close()


def test_huge_pages_false_leaves_the_map_in_small_pages(restore, tmp_path):
    create_app(Config(huge_pages=False, policy_dirs=(str(tmp_path),), reload_interval=0.0,
                      session_store=f"sqlite:{tmp_path / 's.sqlite3'}"), start=False)
    buffer = socket_body._buffer(socket_body.MAPPED_FROM)
    flags = _vm_flags(buffer)
    buffer.close()
    assert "hg" not in flags
    create_app(Config(policy_dirs=(str(tmp_path),), reload_interval=0.0,
                      session_store=f"sqlite:{tmp_path / 's2.sqlite3'}"), start=False)
    buffer = socket_body._buffer(socket_body.MAPPED_FROM)
    assert "hg" in _vm_flags(buffer)
    buffer.close()


def test_a_body_below_the_mapped_size_is_a_bytearray(restore):
    assert type(socket_body._buffer(socket_body.MAPPED_FROM - 1)) is bytearray
