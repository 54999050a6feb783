"""Update a directory the way the kubelet updates a ConfigMap volume (pkg/volume/util/atomic_writer.go).

    name        -> ..data/name
    ..data      -> ..2026_11_21_10_00_00.123456/
    ..2026_11_21_10_00_00.123456/name

``update(files)`` writes a new timestamped directory, points a ``..data_tmp`` symlink at it,
renames that over ``..data`` (the atomic step), creates top-level links for new keys, removes
links of keys that went away and deletes the old timestamped directory, in the kubelet's order.
Hooks between the steps let a test read the directory in every intermediate state.
"""

from __future__ import annotations

import datetime
import os
import shutil
from typing import Callable

DATA = "..data"
DATA_TMP = "..data_tmp"


class ConfigMapVolume:
    def __init__(self, root: str) -> None:
        self.root = root
        os.makedirs(root, exist_ok=True)

    def update(self, files: dict[str, str], between: Callable[[str], None] = lambda step: None) -> str:
        """Replace the whole payload with ``files``; ``between(step)`` runs after each step."""
        old_dir = self.payload_dir()
        new_dir = self._write_payload(files)
        between("payload written")
        tmp = os.path.join(self.root, DATA_TMP)
        os.symlink(os.path.basename(new_dir), tmp)
        os.rename(tmp, os.path.join(self.root, DATA))
        between("..data swapped")
        self._link_new_keys(files)
        between("new keys linked")
        if old_dir:
            shutil.rmtree(old_dir)
        between("old payload removed")
        self._unlink_removed_keys(files)
        between("removed keys unlinked")
        return new_dir

    def payload_dir(self) -> str | None:
        link = os.path.join(self.root, DATA)
        return os.path.join(self.root, os.readlink(link)) if os.path.lexists(link) else None

    def _write_payload(self, files: dict[str, str]) -> str:
        while True:  # two updates in one microsecond would collide
            stamp = datetime.datetime.now().strftime("..%Y_%m_%d_%H_%M_%S.%f")
            path = os.path.join(self.root, stamp)
            if not os.path.exists(path):
                break
        os.mkdir(path)
        for name, text in files.items():
            with open(os.path.join(path, name), "w", encoding="utf-8") as f:
                f.write(text)
        return path

    def _link_new_keys(self, files: dict[str, str]) -> None:
        for name in files:
            link = os.path.join(self.root, name)
            if not os.path.lexists(link):
                os.symlink(os.path.join(DATA, name), link)

    def _unlink_removed_keys(self, files: dict[str, str]) -> None:
        for entry in os.listdir(self.root):
            if not entry.startswith(".") and entry not in files:
                os.unlink(os.path.join(self.root, entry))


def write_plain(directory: str, name: str, text: str) -> None:
    """Create or overwrite a file in place (a developer's directory, a subPath-less test)."""
    with open(os.path.join(directory, name), "w", encoding="utf-8") as f:
        f.write(text)


def delete_plain(directory: str, name: str) -> None:
    os.remove(os.path.join(directory, name))
