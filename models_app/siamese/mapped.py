"""Arrays served from memory-mapped ``.npy`` files, so that every process on a host reads one
page-cache copy of a model's big arrays instead of holding its own.

A folder of mapped arrays is derived from an artifact (an encoder's weights as served, an
index's exact-cosine tables) and written once, by the first process that needs it, under a
temporary name renamed into place (``atomic_directory``); every later process maps the same
files. A file is never changed in place: a process that has it mapped keeps reading the inode it
mapped even if the folder is deleted or written again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import numpy as np

from models_app.siamese.artifacts import (
    MANIFEST,
    ArtifactError,
    atomic_directory,
    read_manifest,
    write_manifest,
)

MAPPED_ARTIFACT = "mapped-arrays"

logger = logging.getLogger(__name__)


def write_mapped(folder: Path, arrays: dict[str, np.ndarray], *, of: str) -> None:
    """Write ``arrays`` as ``<name>.npy`` files into the new folder ``folder``, atomically; its
    manifest names what they were derived from (``of``) and each array's shape and dtype."""
    with atomic_directory(Path(folder)) as scratch:
        described = {}
        for name, array in arrays.items():
            array = np.ascontiguousarray(array)
            np.save(scratch / f"{name}.npy", array, allow_pickle=False)
            described[name] = {"shape": list(array.shape), "dtype": array.dtype.str}
        write_manifest(scratch, {"artifact": MAPPED_ARTIFACT, "of": of, "arrays": described})


def read_mapped(folder: Path, *, of: str, mode: str = "r") -> dict[str, np.ndarray]:
    """The arrays of ``folder``, each mapped from its file (``mode``: ``"r"`` read-only, ``"c"``
    copy-on-write: a write makes a private copy of that page and never reaches the file).

    A file missing, truncated or not what the manifest says is an ``ArtifactError`` naming it;
    nothing is mapped past a file's end, so a short file cannot fault a reader later.
    """
    folder = Path(folder)
    manifest = read_manifest(folder, kind=MAPPED_ARTIFACT)
    if manifest.get("of") != of:
        raise ArtifactError(f"{folder} holds mapped arrays of {manifest.get('of')!r}, not {of!r}")
    arrays = {}
    for name, described in manifest.get("arrays", {}).items():
        path = folder / f"{name}.npy"
        shape, dtype = tuple(described["shape"]), np.dtype(described["dtype"])
        try:
            if 0 in shape:  # nothing to map: an empty file region cannot be mapped
                array = np.load(path, allow_pickle=False)
            else:
                array = np.load(path, mmap_mode=mode, allow_pickle=False)
                size = path.stat().st_size
                if size != array.offset + array.nbytes:
                    raise ValueError(f"{size} bytes where {array.offset + array.nbytes} belong")
        except FileNotFoundError:
            raise ArtifactError(
                f"{path} is missing; delete {folder} to have it written again"
            ) from None
        except (OSError, ValueError) as exc:
            raise ArtifactError(
                f"{path} is truncated or unreadable ({exc}); delete {folder} to have it written "
                "again"
            ) from None
        if array.shape != shape or array.dtype != dtype:
            raise ArtifactError(
                f"{path} holds {array.dtype}{list(array.shape)}, its manifest says "
                f"{dtype}{list(shape)}; delete {folder} to have it written again"
            )
        arrays[name] = array
    return arrays


def mapped_arrays(
    folder: Path,
    *,
    of: str,
    compute: Callable[[], dict[str, np.ndarray]],
    mode: str = "r",
) -> dict[str, np.ndarray]:
    """The arrays of ``folder`` mapped (``read_mapped``); the first process to need them computes
    them and writes the folder. Two processes may both compute: one folder wins the rename and
    both map it. Where the folder cannot be written (a read-only volume) the computed arrays are
    served from this process's memory, as before mapping, and a warning says so."""
    folder = Path(folder)
    if not folder.exists():
        arrays = compute()
        try:
            write_mapped(folder, arrays, of=of)
        except (ArtifactError, OSError) as exc:
            if not (folder / MANIFEST).exists():
                logger.warning("%s cannot be written, served unshared: %s", folder, exc)
                return arrays
        del arrays
    return read_mapped(folder, of=of, mode=mode)
