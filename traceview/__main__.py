"""`python -m traceview` and the `traceview` command: the CLI, with Ctrl-C while the libraries load ending as quietly
as Ctrl-C later does (exit 130, nothing written, no traceback of the import machinery)."""

from __future__ import annotations

import os
import sys

# polars' allocator (jemalloc) keeps freed pages for ten seconds by default, where numpy's (glibc's) cannot use them:
# an analysis that frees a frame and then builds arrays held both. Returned at once, the 10 M-launch realistic export
# peaked at 4.00 GB instead of 4.15, and a dashboard's memory falls back between analyses (0.8 GB to 0.12 GB after
# the 2 M one). Read once, when polars loads: only the command sets it, never a program that imports traceview.
_RETURN_FREED_PAGES = "dirty_decay_ms:0,muzzy_decay_ms:0"


def main() -> None:
    os.environ.setdefault("_RJEM_MALLOC_CONF", _RETURN_FREED_PAGES)
    try:
        from traceview.app.cli import main as cli_main
    except KeyboardInterrupt:
        sys.exit(130)
    cli_main()


if __name__ == "__main__":
    main()
