"""The vLLM server fixture's sweep of /dev/shm (tests/integration/vllm_server.py): what a stopped
server left there goes, what a live process still maps stays, however it maps it. Two runs of the
suite side by side share /dev/shm: one run's sweep must never take the other's live blocks."""

from __future__ import annotations

import ctypes
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.integration.vllm_server import SHARED_MEMORY, block_file, mapped_file, remove_orphaned, shared_memory_blocks


def _mapped_here() -> set[tuple[int, int]]:
    """(device, inode) of every /dev/shm file this process maps."""
    lines = Path("/proc/self/maps").read_text().splitlines()
    return {mapped_file(line) for line in lines if f" {SHARED_MEMORY}/" in line}


@contextmanager
def posix_semaphore() -> Iterator[str]:
    """A named POSIX semaphore made as multiprocessing makes the ones vLLM hands the workers it
    spawns (glibc's sem_open, a `/mp-` name): its file's name in /dev/shm while it is open."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.sem_open.restype = ctypes.c_void_p
    libc.sem_open.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_uint, ctypes.c_uint]
    name = f"/mp-test-{uuid.uuid4().hex[:8]}"
    handle = libc.sem_open(name.encode(), os.O_CREAT | os.O_EXCL, 0o600, 1)
    assert handle not in (None, ctypes.c_void_p(-1).value), os.strerror(ctypes.get_errno())
    try:
        yield f"sem.{name[1:]}"
    finally:
        libc.sem_close(ctypes.c_void_p(handle))
        libc.sem_unlink(name.encode())


def test_a_semaphore_its_maker_still_maps_is_no_orphan() -> None:
    """glibc makes the semaphore under a temporary name and maps it before linking it to its own,
    so its maker maps `sem.XXXXXX (deleted)`, never `sem.mp-*`: found by its file, it is live."""
    with posix_semaphore() as name:
        assert name in shared_memory_blocks()
        assert block_file(name) in _mapped_here()
        remove_orphaned({name})
        assert (SHARED_MEMORY / name).exists()
    assert name not in shared_memory_blocks()


def test_a_block_no_process_maps_is_removed() -> None:
    orphan = SHARED_MEMORY / f"psm_{uuid.uuid4().hex[:8]}"
    orphan.write_bytes(b"\0" * 4096)
    try:
        remove_orphaned({orphan.name})
        assert not orphan.exists()
    finally:
        orphan.unlink(missing_ok=True)
