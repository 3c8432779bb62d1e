"""Opening SQLite inputs (Nsight Systems exports, llama-bench databases) read-only, by a path that stays a path."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from urllib.parse import quote

from traceview.parsers.base import Head


def read_only_uri(path: Path) -> str:
    """Return the `file:` URI that opens `path` read-only, every character that means something in a URI
    percent-encoded (`?`, `#` and `%` in a file name are part of the name)."""
    return f"file:{quote(str(path.resolve()), safe='/')}?mode=ro"


def open_read_only(path: Path) -> sqlite3.Connection:
    """Return a read-only connection to the database at `path`."""
    return sqlite3.connect(read_only_uri(path), uri=True)


SQLITE_MAGIC = b"SQLite format 3\x00"


def sqlite_tables(head: Head) -> frozenset[str] | None:
    """Return the table names of a SQLite file (once per file), or None when it is no SQLite file or its schema
    cannot be read (a damaged database: the Nsight Systems reader then says what is wrong with it)."""

    def tables() -> frozenset[str] | None:
        if not head.raw.startswith(SQLITE_MAGIC):
            return None
        try:
            with closing(open_read_only(head.path)) as connection:
                return frozenset(row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))
        except (sqlite3.DatabaseError, UnicodeDecodeError):
            return None

    found: frozenset[str] | None = head.once("sqlite_tables", tables)
    return found
