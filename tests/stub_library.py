"""Compile a C stand-in (the NVML and AMD SMI stubs) into a shared library, once per content.

The real vendor Python bindings load these by soname; the compile goes to a private name and is
renamed into place, so parallel test processes never load half a file.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

# Warnings are errors: a stub that drifts from the vendor's header must fail to build, not
# misbehave under the binding.
COMMON_FLAGS = ("-shared", "-fPIC", "-O1", "-Wall", "-Wextra", "-Werror", "-Wno-unused-parameter")


def compile_shared_library(
    gcc: str,
    library: Path,
    sources: Sequence[Path],
    include_dir: Path,
    soname: str,
    what: str,
    extra_flags: Sequence[str] = (),
    libraries: Sequence[str] = (),
) -> None:
    """Build `library` from `sources`; RuntimeError with gcc's command and stderr on failure."""
    fd, partial = tempfile.mkstemp(dir=library.parent, suffix=".so")
    os.close(fd)
    command = [
        gcc,
        *COMMON_FLAGS,
        *extra_flags,
        f"-I{include_dir}",
        f"-Wl,-soname,{soname}",
        "-o",
        partial,
        *(str(source) for source in sources),
        *libraries,
    ]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        os.unlink(partial)
        raise RuntimeError(f"compiling the {what} failed:\n{' '.join(command)}\n{result.stderr}")
    os.replace(partial, library)
