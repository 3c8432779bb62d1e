"""Analysis: pure functions over parsed frames (no printing, plotting or CLI). May import parsers only."""
