"""Kernel names comparable across tools: Nsight Compute drops namespaces and casts that Nsight Systems keeps."""

from __future__ import annotations

import re

_NAMESPACE = re.compile(r"\b[A-Za-z_]\w*::(?!\*)")
_CAST = re.compile(r"\((?:bool|int|unsigned int|unsigned|long|unsigned long|long long|unsigned long long|short|char|signed char|unsigned char)\)")


def normalise_kernel_name(name: str) -> str:
    """Return a kernel name comparable across ncu and nsys: no namespaces, casts, leading `void`, extra spaces."""
    text = _CAST.sub("", name.strip())
    previous = None
    while previous != text:
        previous, text = text, _NAMESPACE.sub("", text)
    text = re.sub(r"^void\s+", "", text)
    return " ".join(text.split())
