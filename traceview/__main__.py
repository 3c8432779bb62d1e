"""`python -m traceview` and the `traceview` command: the CLI, with Ctrl-C while the libraries load ending as quietly
as Ctrl-C later does (exit 130, nothing written, no traceback of the import machinery)."""

from __future__ import annotations

import sys

# Decided before polars (and its allocator) loads: these import neither polars nor numpy.
from traceview.allocators import gives_memory_back_at_once, set_allocators


def main() -> None:
    set_allocators(gives_memory_back_at_once(sys.argv[1:]))
    try:
        from traceview.app.cli import main as cli_main
    except KeyboardInterrupt:
        sys.exit(130)
    cli_main()


if __name__ == "__main__":
    main()
