"""How freed memory is handled, decided once from the command line before polars (and its allocator) loads: given back
to the system at once for large inputs and for the commands that stay up between analyses, kept for reuse otherwise.
Only the command sets it (traceview.__main__), never a program that imports traceview. Imports neither polars nor
numpy."""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
from collections.abc import Iterator

# polars' allocator (jemalloc) keeps freed pages for ten seconds by default, where numpy's (glibc's) cannot use them:
# an analysis that frees a frame and then builds arrays held both. Returned at once, the 10 M-launch realistic export
# peaked at 4.00 GB instead of 4.15, and a dashboard's memory falls back between analyses (0.8 GB to 0.12 GB after
# the 2 M one). Kept a second instead, the realistic 2 M-launch export took 1.5-2 s less of its 13-17 s (2 s less
# system time: pages zeroed and mapped again) at the same peak within 0.05 GB (three runs each). It is read once,
# when polars loads, and an allocator setting of the user's own is left as it is.
_RETURN_FREED_PAGES = "dirty_decay_ms:0,muzzy_decay_ms:0"
_KEEP_FREED_PAGES_A_SECOND = "dirty_decay_ms:1000,muzzy_decay_ms:0"
_M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter (malloc.h)
_GIVEN_BACK_FROM_BYTES = 128 * 1024
_REUSED_UP_TO_BYTES = 8 * 2**20
_gives_arrays_back = False  # set by give_freed_arrays_back
_reusing_freed_blocks = False  # switched by reuse_freed_blocks


def gives_memory_back_at_once(arguments: list[str]) -> bool:
    """Return whether a command line (without the program) should have freed memory given back at once: for the
    dashboard and the MCP server (resources.LONG_RUNNING_COMMANDS) and wherever an argument names a large input
    (resources.LARGE_INPUT_BYTES). Every input a command analyses is named on its command line, except the
    dashboard's uploads and the MCP server's files: those two always give memory back."""
    from traceview.resources import LONG_RUNNING_COMMANDS, is_large_input  # they import neither polars nor numpy

    words = [word for word in arguments if not word.startswith("-")]
    return bool(words and words[0] in LONG_RUNNING_COMMANDS) or any(is_large_input(word) for word in words[1:])


def set_allocators(at_once: bool) -> None:
    """Set how polars' allocator (jemalloc, unless the user set it) and glibc's treat freed memory: given back at once,
    or kept for reuse. Must run before polars loads."""
    os.environ.setdefault("_RJEM_MALLOC_CONF", _RETURN_FREED_PAGES if at_once else _KEEP_FREED_PAGES_A_SECOND)
    if at_once:
        give_freed_arrays_back()


def give_freed_arrays_back() -> None:
    """Have glibc map blocks over 128 kB on their own, so that a freed numpy array goes back to the system at once.

    glibc raises that threshold to the size of each large block freed, up to 32 MB: after the first few, the analysis'
    arrays of a million rows come from the heap and stay held once freed, and are reused without being mapped again.
    Kept and reused, the realistic 2 M-launch export (1.2 GB) took 1-2.4 s less (2.5-3.5 s less system time) for
    0.1-0.25 GB more at its peak (0.58 -> 0.70-0.83 GB; three runs each); the 10 M-launch one (6.4 GB) peaked at
    1.90 GB, against 1.83-1.87 GB given back: the 2 GB bound needs that room. Elsewhere (musl, macOS, Windows) nothing
    is changed.
    """
    global _gives_arrays_back
    if _glibc_call("mallopt", _M_MMAP_THRESHOLD, _GIVEN_BACK_FROM_BYTES):
        _gives_arrays_back = True


def reuse_freed_blocks(reuse: bool) -> None:
    """Where freed arrays go back at once (give_freed_arrays_back), have glibc keep freed blocks of up to 8 MB for
    reuse (`reuse`), or give them back at once again, with the free ones it holds; elsewhere nothing changes.

    For a stretch of the analysis that comes after its peak and frees and makes arrays chunk after chunk (the NVTX
    pass): on the 10 M-launch realistic export, mapping and zeroing those again took 18 s of system time (6.3 M page
    faults) of that pass's 31 s. Kept for reuse there, it took 23 s (10 s system time) and held at most 1.79 GB,
    under the 1.86 GB the sweep before it peaks at; kept to the end of the analysis instead, the gaps' causes after
    the pass reached 1.85 GB (one run each)."""
    global _reusing_freed_blocks
    if not _gives_arrays_back or reuse == _reusing_freed_blocks:
        return
    _glibc_call("mallopt", _M_MMAP_THRESHOLD, _REUSED_UP_TO_BYTES if reuse else _GIVEN_BACK_FROM_BYTES)
    if not reuse:
        _glibc_call("malloc_trim", 0)  # the free blocks in the middle of the heap, which trimming its top leaves
    _reusing_freed_blocks = reuse


@contextlib.contextmanager
def freed_blocks_given_back_after() -> Iterator[None]:
    """Inside, reuse_freed_blocks may be switched on; on leaving (an error too), freed blocks go back at once again."""
    try:
        yield
    finally:
        reuse_freed_blocks(False)


def _glibc_call(name: str, *arguments: int) -> bool:
    """Call one of glibc's malloc functions; return whether it was there (False on musl, macOS, Windows)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        getattr(ctypes.CDLL(None), name)(*arguments)
    except (OSError, AttributeError):
        return False
    return True
