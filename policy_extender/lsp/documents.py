"""The policy set a document belongs to: the files directly in its directory, read the way serve
reads a ConfigMap volume (``policyset.read_sources``), with the editor's unsaved text over what is
on disk, analysed by ``lang.analyse`` (every diagnostic, whatever the errors)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from policy_extender.errors import PolicyError
from policy_extender.lang.program import Analysis, analyse
from policy_extender.policyset import SUFFIXES, read_sources
from policy_extender.policyset.files import ReadError


def in_set(path: Path) -> bool:
    """Whether a file of this name is part of its directory's set (a policy or values file)."""
    return path.name.endswith(SUFFIXES) and not path.name.startswith(".")


@dataclass
class SetView:
    directory: Path
    sources: dict[str, str]                      # file name -> text, the editor's over the disk's
    paths: dict[str, Path]                       # file name -> the path an editor opens
    memo: dict = field(default_factory=dict, repr=False)   # lang.analyse's parses, kept by Documents
    analysis: Analysis = field(init=False)

    def __post_init__(self) -> None:
        self.analysis = analyse(self.sources, self.memo)

    def path_of(self, name: str) -> Path:
        return self.paths.get(name, self.directory / name)


class Documents:
    """The documents the editor has open (path -> text); each change makes a new ``SetView`` of
    the document's set, the last one kept per directory."""

    def __init__(self) -> None:
        self.open: dict[Path, str] = {}
        self.views: dict[Path, SetView] = {}
        self.disk: dict[Path, tuple[dict[str, str], dict[str, Path]]] = {}  # read once per directory
        self.memo: dict = {}

    def update(self, path: Path, text: str) -> SetView:
        self.open[path] = text
        return self.refresh(path.parent)

    def close(self, path: Path) -> SetView:
        self.open.pop(path, None)
        return self.refresh(path.parent)

    def view(self, path: Path) -> SetView:
        return self.views.get(path.parent) or self.refresh(path.parent)

    def reread(self, directory: Path) -> SetView:
        """Read the set of ``directory`` from disk again (a file saved, created or deleted)."""
        self.disk.pop(directory, None)
        return self.refresh(directory)

    def refresh(self, directory: Path) -> SetView:
        """Analyse the set of ``directory``: the files on disk (read once, until ``reread``) with
        the open documents' text over them."""
        if directory not in self.disk:
            self.disk[directory] = _on_disk(directory)
        on_disk, where = self.disk[directory]
        sources, paths = dict(on_disk), dict(where)
        for path, text in self.open.items():
            if path.parent == directory and in_set(path):
                sources[path.name], paths[path.name] = text, path
        view = SetView(directory, sources, paths, self.memo)
        self.views[directory] = view
        return view


def _on_disk(directory: Path) -> tuple[dict[str, str], dict[str, Path]]:
    """The set's files as serve would read them; nothing when the directory cannot be read (the
    editor's open files then make the set alone)."""
    try:
        sources = read_sources([str(directory)]) if os.path.isdir(directory) else {}
    except (ReadError, PolicyError, OSError):
        return {}, {}
    return dict(sources), {name: directory / name for name in sources}
