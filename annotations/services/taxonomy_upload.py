"""A taxonomy file uploaded through the page or the API: checked for size, put where the
importer reads it (a file, or an O*NET zip unpacked with a bound on what it may write), and
imported all or nothing."""

from __future__ import annotations

import re
import tempfile
import zipfile
import zlib
from pathlib import Path

from django.template.defaultfilters import filesizeformat

from annotations.importers import ONET_ALTERNATES, ONET_OCCUPATIONS, ONET_RELATED, ImportFileError
from annotations.models import Taxonomy
from annotations.services.taxonomy import ImportReport, taxonomy_import
from siamweb.uploads import copy_capped

# An upload larger than this is refused before it is read: O*NET's zip is a few MB and ESCO's
# occupations file about 20 MB; the command line imports anything bigger.
MAX_IMPORT_BYTES = 50 * 1024 * 1024
# What an O*NET zip may unpack to, in all (a zip's header can lie: the copy is counted too).
MAX_UNZIPPED_BYTES = 200 * 1024 * 1024


def upload_too_large(size: int) -> str | None:
    """Why an upload of ``size`` bytes is refused, or None when it is not."""
    if size <= MAX_IMPORT_BYTES:
        return None
    return (
        f"the file is {filesizeformat(size)}; uploads take up to "
        f"{filesizeformat(MAX_IMPORT_BYTES)} (the import_taxonomy command takes bigger ones)"
    )


def taxonomy_import_upload(
    *, upload, fmt: str, slug: str, name: str | None, user, skip_bad_rows: bool = False
) -> ImportReport:
    """Import an uploaded file as ``taxonomy_import`` imports one from disk; raises
    ``ImportFileError`` for a file it cannot read and ``ImportRejected`` for bad rows."""
    too_large = upload_too_large(upload.size)
    if too_large:
        raise ImportFileError(too_large)
    with tempfile.TemporaryDirectory(prefix="siamweb-import-") as folder:
        path = _unpack(upload, fmt, Path(folder))
        return taxonomy_import(
            slug=slug, path=path, fmt=fmt, name=name, user=user, skip_bad_rows=skip_bad_rows
        )


def _upload_name(upload) -> str:
    """The uploaded file's own name, so that the import report says "jobs.csv:12"."""
    name = re.sub(r"[^\w.\- ]", "_", Path(upload.name or "").name)[:100].strip(" .")
    return name or "upload"


def _unpack(upload, fmt: str, folder: Path) -> Path:
    """Put the upload where the importer reads it: a file for csv and esco, a folder for onet."""
    if fmt != Taxonomy.Format.ONET:
        path = folder / _upload_name(upload)
        with path.open("wb") as out:
            for chunk in upload.chunks():
                out.write(chunk)
        return path
    try:
        archive = zipfile.ZipFile(upload)
    except zipfile.BadZipFile:
        raise ImportFileError(
            f"{_upload_name(upload)} is not a zip archive; the onet format takes a .zip of the "
            f"O*NET text files"
        ) from None
    wanted = {ONET_OCCUPATIONS, ONET_ALTERNATES, ONET_RELATED}
    budget = MAX_UNZIPPED_BYTES
    target = folder / "onet"
    target.mkdir()
    with archive:
        for info in archive.infolist():
            # Matched by file name wherever the zip keeps it; nothing else is written out.
            name = Path(info.filename).name
            if info.is_dir() or name not in wanted or (target / name).exists():
                continue
            try:
                with archive.open(info) as source, (target / name).open("wb") as out:
                    copied = copy_capped(source, out, limit=budget)
            except (zipfile.BadZipFile, zlib.error, EOFError) as exc:
                raise ImportFileError(
                    f"{info.filename} in {_upload_name(upload)} is damaged ({exc}); "
                    "zip the O*NET text files again"
                ) from None
            except (RuntimeError, NotImplementedError) as exc:  # encrypted, or a method unknown
                raise ImportFileError(
                    f"{info.filename} in {_upload_name(upload)} cannot be read ({exc}); zip the "
                    "O*NET text files without a password, compressed with deflate or not at all"
                ) from None
            if copied > budget:
                raise ImportFileError(
                    f"the zip unpacks to more than {MAX_UNZIPPED_BYTES // 2**20} MB; "
                    "use the import_taxonomy command"
                )
            budget -= copied
    return target
