"""LLM decode ceiling: tokens/s that memory bandwidth allows, and memory-bandwidth utilisation (MBU). Pure.

Decode reads every weight once per step and each sequence's KV cache once per token (peers.md §3.5):
  bytes per step  = weights + batch × KV bytes per sequence
  KV per sequence = 2 (K and V) × layers × kv_heads × head_dim × context × kv_bits / 8
  ceiling         = bandwidth / bytes per step steps/s; × batch tokens/s in aggregate
  MBU             = measured tokens/s × bytes per token / bandwidth
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from traceview.errors import UsageError

# Matched against the stripped text, with one way to split any input: digits split two ways (`[0-9]*\.?[0-9]+`) or
# two `\s*` around optional parts take the square of the length of a long damaged value.
_NUMBER = r"(\d+(?:\.\d*)?(?:e[+-]?\d+)?|\.\d+(?:e[+-]?\d+)?)"
_SIZE = re.compile(rf"^{_NUMBER}\s*([kmgtp]?)(i?)(b|bytes?)?(/s|ps)?$", re.IGNORECASE)
_COUNT = re.compile(rf"^{_NUMBER}\s*([kmbt]?)$", re.IGNORECASE)
# No size, count or duration a user types is longer: a longer one is refused before any pattern runs.
_MAX_VALUE_CHARS = 64
_PREFIX = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12, "p": 1e15}
_BINARY = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40, "p": 2**50}


def parse_bytes(text: str, what: str = "size") -> float:
    """Return bytes from `4.2GB`, `3.56 GiB`, `4200MB`, `3.35TB/s` (decimal unless `i`), or a plain number."""
    match = _SIZE.match(str(text).strip()) if len(str(text)) <= _MAX_VALUE_CHARS else None
    if not match:
        raise UsageError(f"cannot read {what} {str(text)[:_MAX_VALUE_CHARS]!r} — write it like 4.2GB, 3.56GiB or 3.35TB/s")
    number, prefix, binary, unit, _ = match.groups()
    if not prefix and not unit:
        # A large bare number is most likely bytes: show it scaled, not with a unit glued on (`960e9TB/s`).
        value = float(number)
        if value >= 1e6:
            example = f"{value / 1e9:g}GB/s if it is bytes per second" if what == "bandwidth" else f"{value / 1e9:g}GB if it is bytes"
        else:
            example = f"{text}TB/s or {text}GB/s" if what == "bandwidth" else f"{text}GB or {text}GiB"
        raise UsageError(f"{what} {text!r} has no unit — write it like {example}")
    scale = _BINARY[prefix.lower()] if binary else _PREFIX[prefix.lower()]
    return float(number) * scale


_DURATION = re.compile(r"^(\d+(?:\.\d+)?)\s*(ns|us|µs|ms|s)$", re.IGNORECASE)
_DURATION_NS = {"ns": 1.0, "us": 1e3, "µs": 1e3, "ms": 1e6, "s": 1e9}


def parse_duration_ns(text: str, what: str = "duration") -> int:
    """Return nanoseconds from `500ms`, `100us`, `2s`, `250ns`; a number without a unit is refused."""
    match = _DURATION.match(str(text).strip()) if len(str(text)) <= _MAX_VALUE_CHARS else None
    if not match:
        raise UsageError(f"cannot read {what} {str(text)[:_MAX_VALUE_CHARS]!r} — give a number with a unit, like 500ms, 100us or 2s")
    number, unit = match.groups()
    return int(float(number) * _DURATION_NS[unit.lower()])


def parse_count(text: str) -> float:
    """Return a parameter count from `7B`, `6.74b`, `70B`, `1.5T`, `350M` or a plain number."""
    match = _COUNT.match(str(text).strip()) if len(str(text)) <= _MAX_VALUE_CHARS else None
    if not match:
        raise UsageError(f"cannot read parameter count {str(text)[:_MAX_VALUE_CHARS]!r} — write it like 7B, 6.74B or 350M")
    number, suffix = match.groups()
    return float(number) * {"": 1.0, "k": 1e3, "m": 1e6, "b": 1e9, "t": 1e12}[suffix.lower()]


def kv_cache_bytes(layers: int, kv_heads: int, head_dim: int, context: int, kv_bits: float = 16) -> float:
    """Return the KV-cache bytes one sequence reads per decoded token at this context length."""
    return 2 * layers * kv_heads * head_dim * context * kv_bits / 8


@dataclass(frozen=True)
class DecodeCeiling:
    """Bytes per decode step and the tokens/s that bandwidth allows; MBU when a measured rate is given."""

    weight_bytes: float
    kv_bytes_per_sequence: float
    batch: int
    bandwidth_bytes_per_s: float
    bytes_per_step: float
    bytes_per_token: float  # bytes moved per generated token (weights shared across the batch)
    ceiling_tokens_per_s: float  # aggregate over the batch
    ceiling_tokens_per_s_per_sequence: float
    measured_tokens_per_s: float | None = None
    achieved_bytes_per_s: float | None = None
    mbu_pct: float | None = None
    warning: str | None = None


def decode_ceiling(
    weight_bytes: float,
    bandwidth_bytes_per_s: float,
    kv_bytes_per_sequence: float = 0.0,
    batch: int = 1,
    measured_tokens_per_s: float | None = None,
) -> DecodeCeiling:
    """Return the decode ceiling for these bytes and bandwidth; with a measured aggregate rate, its MBU."""
    if weight_bytes <= 0 or bandwidth_bytes_per_s <= 0 or batch < 1:
        raise UsageError("weights and bandwidth must be positive and the batch at least 1")
    per_step = weight_bytes + batch * kv_bytes_per_sequence
    per_token = per_step / batch
    steps = bandwidth_bytes_per_s / per_step
    achieved = mbu = None
    warning = None
    if measured_tokens_per_s is not None:
        achieved = measured_tokens_per_s * per_token
        mbu = 100.0 * achieved / bandwidth_bytes_per_s
        if mbu > 100.0:
            warning = (
                f"MBU {mbu:.0f}% is above 100%: the inputs are wrong — bytes per token too high (weights not all read "
                "per token: MoE, tied or skipped layers?), wrong bandwidth (another SKU?), or the rate is not decode-only"
            )
    return DecodeCeiling(weight_bytes, kv_bytes_per_sequence, batch, bandwidth_bytes_per_s, per_step, per_token,
                         steps * batch, steps, measured_tokens_per_s, achieved, mbu, warning)
