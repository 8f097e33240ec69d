"""Object storage for the folders that may be URLs (`raw_dir`, `staging_dir`, `gold_dir`,
`quarantine_dir`): presence checks, whole-file uploads and downloads through fsspec.

The stages always read and write local files (a run's working copy, `work_dir`), so local
folders keep their speed and the readers stay the same; a URL folder is the durable place the
working copy is fetched from and published to. An upload is one whole-object write (S3 `PUT`,
multipart below the library), so an object appears complete or not at all.

Credentials and the endpoint: the options given with `use_options` (inside Airflow, from the
object-storage connection: `tokokita_airflow.connections`), else the standard AWS environment
(`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_ENDPOINT_URL`, ...), as for any botocore
client: the command line.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tokokita_etl.files import atomic_path

#: a local folder (a Path) or an object-storage URL such as `s3://bucket/prefix` (a str)
Location = Path | str

#: the AWS environment variables an S3 filesystem is made with (fsspec keeps one filesystem
#: per set of arguments: passing them makes a changed endpoint or key a new filesystem)
_S3_ENV = {"endpoint_url": "AWS_ENDPOINT_URL", "key": "AWS_ACCESS_KEY_ID",
           "secret": "AWS_SECRET_ACCESS_KEY"}
#: the S3 URL schemes
_S3_SCHEMES = ("s3://", "s3a://")
#: the filesystem options given with `use_options`, by protocol
_OPTIONS: dict[str, dict[str, Any]] = {}


def is_url(location: Location) -> bool:
    """Whether `location` is an object-storage URL (else a local path)."""
    return isinstance(location, str) and "://" in location


def use_options(protocol: str, options: Mapping[str, Any] | None) -> None:
    """Open the filesystems of `protocol` (`s3`) with these fsspec options (s3fs: `key`,
    `secret`, `token`, `endpoint_url`, `config_kwargs`) from now on in this process, instead
    of the environment's; None: the environment's again."""
    if options is None:
        _OPTIONS.pop(protocol, None)
    else:
        _OPTIONS[protocol] = dict(options)


def filesystem(url: str) -> tuple[Any, str]:
    """The fsspec filesystem of `url` and the path inside it."""
    import fsspec

    options: dict[str, Any] = {}
    if url.startswith(_S3_SCHEMES):
        if "s3" in _OPTIONS:
            options = _OPTIONS["s3"]
        else:
            options = {name: os.environ[var] for name, var in _S3_ENV.items()
                       if os.environ.get(var)}
    return fsspec.core.url_to_fs(url, **options)


def object_info(url: str) -> dict[str, Any] | None:
    """What the store says of the object at `url` (its `size`, its `ETag`...), asked afresh,
    or None when there is no object there."""
    fs, path = filesystem(url)
    fs.invalidate_cache(path)  # a poller asks again and again: never a cached answer
    try:
        info = fs.info(path)
    except FileNotFoundError:
        return None
    return info if info.get("type") == "file" else None


def file_size(location: Location) -> int | None:
    """The size of the file or object at `location`, None when there is none."""
    if not is_url(location):
        try:
            path = Path(location)
            return path.stat().st_size if path.is_file() else None
        except OSError:
            return None
    info = object_info(str(location))
    return None if info is None else int(info.get("size") or 0)


def upload(local: Path, url: str) -> None:
    """Put the local file at `url` as one object."""
    fs, path = filesystem(url)
    fs.put_file(os.fspath(local), path)


def download(url: str, local: Path) -> None:
    """Get the object at `url` into `local` (a temporary sibling renamed into place, so a
    broken transfer leaves no partial file); FileNotFoundError when there is none."""
    fs, path = filesystem(url)
    with atomic_path(local) as partial:
        fs.get_file(path, os.fspath(partial))


def names(url: str) -> list[str]:
    """The names of the objects directly under the folder `url` ([] when there is none)."""
    fs, path = filesystem(url)
    try:
        entries = fs.ls(path, detail=True, refresh=True)
    except FileNotFoundError:
        return []
    return sorted(entry["name"].rstrip("/").rsplit("/", 1)[-1] for entry in entries
                  if entry.get("type") == "file")


def remove_folder(url: str) -> None:
    """Remove every object under the folder `url` (nothing when there is none)."""
    fs, path = filesystem(url)
    with contextlib.suppress(FileNotFoundError):
        fs.rm(path, recursive=True)


def remove_file(url: str) -> None:
    """Remove the object at `url` (nothing when there is none)."""
    fs, path = filesystem(url)
    with contextlib.suppress(FileNotFoundError):
        fs.rm_file(path)

