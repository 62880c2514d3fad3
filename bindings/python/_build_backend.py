"""The build backend of the ``outboard`` package (PEP 517, with PEP 660's
editable installs): it writes the wheel itself, with the standard library,
so that ``pip install`` works offline and needs no ``setuptools`` or
``wheel`` in the environment. The package is pure Python, so a wheel is a
zip of ``outboard/`` and its metadata.

The version is written in one place: ``outboard/__init__.py``'s
``__version__``.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile
from pathlib import Path
from typing import Dict, List, Optional, Tuple

HERE = Path(__file__).resolve().parent
NAME = "outboard"
SUMMARY = "Python bindings for Outboard, cluster communication offloaded to the NIC (ctypes over liboutboard_capi.so)"
LICENSE = "MIT OR Apache-2.0"
REQUIRES_PYTHON = ">=3.8"
TAG = "py3-none-any"
# Zip entries get a fixed time, so that a wheel depends only on the sources.
EPOCH = (1980, 1, 1, 0, 0, 0)


def version() -> str:
    text = (HERE / NAME / "__init__.py").read_text(encoding="utf-8")
    m = re.search(r'^__version__ = "([^"]+)"$', text, re.M)
    if m is None:
        raise RuntimeError(f"no __version__ = \"...\" line in {HERE / NAME / '__init__.py'}")
    return m.group(1)


def _package_files() -> List[Path]:
    """The package's files, relative to HERE: its modules and py.typed."""
    files = []
    for root, dirs, names in os.walk(HERE / NAME):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for n in sorted(names):
            if n.endswith(".py") or n == "py.typed":
                files.append((Path(root) / n).relative_to(HERE))
    return files


def _metadata() -> str:
    readme = (HERE / "README.md").read_text(encoding="utf-8")
    return (
        "Metadata-Version: 2.1\n"
        f"Name: {NAME}\n"
        f"Version: {version()}\n"
        f"Summary: {SUMMARY}\n"
        f"License: {LICENSE}\n"
        f"Requires-Python: {REQUIRES_PYTHON}\n"
        "Description-Content-Type: text/markdown\n"
        "\n"
        f"{readme}"
    )


def _dist_info() -> str:
    return f"{NAME}-{version()}.dist-info"


def _dist_info_files() -> Dict[str, bytes]:
    wheel = f"Wheel-Version: 1.0\nGenerator: {NAME} _build_backend\nRoot-Is-Purelib: true\nTag: {TAG}\n"
    return {
        "METADATA": _metadata().encode(),
        "WHEEL": wheel.encode(),
        "top_level.txt": f"{NAME}\n".encode(),
    }


def _write_wheel(wheel_directory: str, contents: List[Tuple[str, bytes]]) -> str:
    """Writes a wheel of `contents` (archive name, bytes) and its
    dist-info, with the RECORD of every file; returns its file name."""
    dist_info = _dist_info()
    contents = contents + [(f"{dist_info}/{n}", b) for n, b in _dist_info_files().items()]
    record = io.StringIO()
    for name, data in contents:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.write(f"{name},sha256={digest},{len(data)}\n")
    record.write(f"{dist_info}/RECORD,,\n")
    contents.append((f"{dist_info}/RECORD", record.getvalue().encode()))
    filename = f"{NAME}-{version()}-{TAG}.whl"
    with zipfile.ZipFile(Path(wheel_directory) / filename, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in contents:
            info = zipfile.ZipInfo(name, EPOCH)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    return filename


def get_requires_for_build_wheel(config_settings: Optional[dict] = None) -> List[str]:
    return []


def get_requires_for_build_sdist(config_settings: Optional[dict] = None) -> List[str]:
    return []


def get_requires_for_build_editable(config_settings: Optional[dict] = None) -> List[str]:
    return []


def build_wheel(wheel_directory: str, config_settings: Optional[dict] = None, metadata_directory: Optional[str] = None) -> str:
    return _write_wheel(wheel_directory, [(f.as_posix(), (HERE / f).read_bytes()) for f in _package_files()])


def build_editable(wheel_directory: str, config_settings: Optional[dict] = None, metadata_directory: Optional[str] = None) -> str:
    """A wheel whose .pth file puts this directory on sys.path: edits to
    the sources take effect without reinstalling."""
    return _write_wheel(wheel_directory, [(f"__editable__.{NAME}.pth", f"{HERE}\n".encode())])


def build_sdist(sdist_directory: str, config_settings: Optional[dict] = None) -> str:
    base = f"{NAME}-{version()}"
    filename = f"{base}.tar.gz"
    files = [Path("pyproject.toml"), Path("_build_backend.py"), Path("README.md")] + _package_files()
    with tarfile.open(Path(sdist_directory) / filename, "w:gz", format=tarfile.PAX_FORMAT) as t:
        for f in files:
            data = (HERE / f).read_bytes()
            info = tarfile.TarInfo(f"{base}/{f.as_posix()}")
            info.size, info.mode = len(data), 0o644
            t.addfile(info, io.BytesIO(data))
        pkg_info = _metadata().encode()
        info = tarfile.TarInfo(f"{base}/PKG-INFO")
        info.size, info.mode = len(pkg_info), 0o644
        t.addfile(info, io.BytesIO(pkg_info))
    return filename
