"""Opening SQLite inputs (Nsight Systems exports, llama-bench databases) read-only, by a path that stays a path."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from urllib.parse import quote


def read_only_uri(path: Path) -> str:
    """Return the `file:` URI that opens `path` read-only, every character that means something in a URI
    percent-encoded (`?`, `#` and `%` in a file name are part of the name)."""
    return f"file:{quote(str(path.resolve()), safe='/')}?mode=ro"


def open_read_only(path: Path) -> sqlite3.Connection:
    """Return a read-only connection to the database at `path`."""
    return sqlite3.connect(read_only_uri(path), uri=True)
