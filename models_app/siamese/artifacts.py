"""Atomic artifact folders: written under a temporary name, renamed into place when complete.

A reader therefore sees either no folder or a whole one; a process killed mid-write leaves only a
``.tmp-`` folder that nothing loads.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import uuid
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

MANIFEST = "manifest.json"


# What reading a damaged file can raise besides OSError: a truncated or foreign .npz
# (BadZipFile, zlib.error, EOFError, KeyError), a pickle-based .pt (UnpicklingError, EOFError,
# IndexError), a value of the wrong shape or type (ValueError, TypeError).
DAMAGED_FILE_ERRORS = (
    OSError,
    ValueError,
    KeyError,
    TypeError,
    IndexError,
    EOFError,
    zipfile.BadZipFile,
    zlib.error,
    pickle.UnpicklingError,
)


class ArtifactError(RuntimeError):
    """An artifact folder that is missing, incomplete or of an unexpected kind."""


def fsync_path(path: Path) -> None:
    """Flush a file's bytes, or a folder's entries (a rename in it), to the disk: a rename is
    only as durable as what it names, after a power loss as well as after a crash."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


@contextmanager
def atomic_directory(final: Path) -> Iterator[Path]:
    """Yield a scratch folder; on success it becomes ``final`` in one rename."""
    final = Path(final)
    if final.exists():
        raise ArtifactError(f"{final} already exists; artifacts are never overwritten")
    final.parent.mkdir(parents=True, exist_ok=True)
    scratch = final.parent / f".tmp-{final.name}-{uuid.uuid4().hex[:8]}"
    scratch.mkdir()
    try:
        yield scratch
        # Every file, subfolders' too (a sentence-transformers model has a folder per module).
        for path in scratch.rglob("*"):
            if path.is_file():
                fsync_path(path)
        scratch.rename(final)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise


def write_manifest(folder: Path, manifest: dict[str, Any]) -> None:
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True))


def read_manifest(folder: Path, *, kind: str) -> dict[str, Any]:
    path = Path(folder) / MANIFEST
    try:
        manifest = json.loads(path.read_text())
    except FileNotFoundError:
        raise ArtifactError(f"{folder} is not a complete artifact (no {MANIFEST})") from None
    except (OSError, ValueError) as exc:
        raise ArtifactError(f"{path} is unreadable: {exc}") from None
    if manifest.get("artifact") != kind:
        raise ArtifactError(f"{folder} holds a {manifest.get('artifact')!r}, expected {kind!r}")
    return manifest
