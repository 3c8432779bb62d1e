"""How much more memory this process may take before the system or its container refuses or kills it: what a reader
checks before it reads an export too large for the machine, so that the user gets one line instead of the OOM killer."""

from __future__ import annotations

import os
from pathlib import Path

from traceview.errors import UsageError

MEMORY_ENV = "TRACEVIEW_MAX_MEMORY_GB"  # the budget in GB (10^9 bytes) instead of what the machine has; 0: no check
_UNLIMITED = 1 << 60  # cgroup v1 writes "no limit" as a number near 2^63
# Inputs from this size on are analysed with freed memory given back to the system at once (traceview.allocators sets
# both allocators, polars' and glibc's), which costs time (pages mapped, zeroed and unmapped again) but keeps the
# peak of the 10 M-launch realistic export (6.4 GB) under 2 GB. Smaller ones reuse it: see traceview.allocators.
LARGE_INPUT_BYTES = 2 * 10**9
# Commands that stay up between analyses: their memory should fall back after each, so they give freed memory back
# at once whatever the input's size.
LONG_RUNNING_COMMANDS = ("serve", "mcp")


def is_large_input(path: str | Path) -> bool:
    """Return whether `path` is a regular file of LARGE_INPUT_BYTES or more (False for anything else, unreadable too)."""
    try:
        path = Path(path)
        return path.is_file() and path.stat().st_size >= LARGE_INPUT_BYTES
    except (OSError, ValueError):  # no such file, no permission, a name the system cannot take
        return False


def _number(path: Path) -> int | None:
    """Return the integer in a one-value kernel file ("max" and absent files: None)."""
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() and int(text) < _UNLIMITED else None


def _stat_value(path: Path, key: str) -> int:
    """Return one counter of a memory.stat file (0 when absent)."""
    try:
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key and value.strip().isdigit():
                return int(value)
    except OSError:
        pass
    return 0


def cgroup_room_bytes(root: Path = Path("/sys/fs/cgroup"), own: Path = Path("/proc/self/cgroup")) -> int | None:
    """Return the room left under this process's cgroup memory limit (v2 memory.max, or v1 memory.limit_in_bytes), less
    what the group holds that it cannot give back (its use less inactive page cache), or None without a limit."""
    try:
        lines = own.read_text().splitlines()
    except OSError:
        lines = []
    group = next((line.split(":", 2)[2] for line in lines if line.startswith("0::")), "/")
    for folder in (root / group.lstrip("/"), root):  # in a container the group's own path is often the root
        limit = _number(folder / "memory.max")
        if limit is not None:
            used = (_number(folder / "memory.current") or 0) - _stat_value(folder / "memory.stat", "inactive_file")
            return max(0, limit - max(0, used))
    v1 = root / "memory"
    limit = _number(v1 / "memory.limit_in_bytes")
    if limit is not None:
        used = (_number(v1 / "memory.usage_in_bytes") or 0) - _stat_value(v1 / "memory.stat", "total_inactive_file")
        return max(0, limit - max(0, used))
    return None


def _meminfo_available_bytes(path: Path = Path("/proc/meminfo")) -> int | None:
    try:
        for line in path.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _address_space_room_bytes() -> int | None:
    try:
        import resource  # Unix only
    except ImportError:
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return None
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return max(0, soft - pages * os.sysconf("SC_PAGE_SIZE"))


def memory_budget_bytes() -> int | None:
    """Return how many more bytes this process may take: TRACEVIEW_MAX_MEMORY_GB where set, else the least of the
    machine's available memory (MemAvailable), the room under its cgroup's limit and under its address-space limit;
    None where nothing is known (not Linux) or the variable is 0 (no check)."""
    given = os.environ.get(MEMORY_ENV, "").strip()
    if given:
        try:
            gigabytes = float(given)
        except ValueError:
            gigabytes = -1.0
        if not gigabytes >= 0 or gigabytes == float("inf"):
            raise UsageError(f"{MEMORY_ENV}={given!r} is not a number of GB — set it to e.g. 16, or to 0 to turn the memory check off")
        return None if gigabytes == 0 else int(gigabytes * 1e9)
    known = [room for room in (_meminfo_available_bytes(), cgroup_room_bytes(), _address_space_room_bytes()) if room is not None]
    return min(known) if known else None
