"""The decode ceiling reproduces published figures within 2 %, and MBU flags impossible inputs."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from traceview.analyzer.decode import decode_ceiling, kv_cache_bytes, parse_bytes, parse_count
from traceview.app.cli import app
from traceview.errors import UsageError

runner = CliRunner()


def decode_json(*args):
    result = runner.invoke(app, ["decode", *args, "-f", "json"])
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.parametrize(
    ("args", "published"),
    [
        (["--gpu", "h100-sxm"], 790),  # 3.35 TB/s
        (["--bandwidth", "2.0TB/s"], 470),  # A100 80GB as the figure states it
        (["--gpu", "rtx4090"], 240),  # 1.01 TB/s
        (["--device", "jetson-agx-orin-64gb"], 48),  # 204.8 GB/s
    ],
)
def test_published_ceilings_for_4_2_gb_of_weights(args, published):
    data = decode_json("--weights", "4.2GB", *args)
    assert data["ceiling_tokens_per_s"] == pytest.approx(published, rel=0.02)


@pytest.mark.parametrize(
    ("weights", "measured", "published_pct"),
    [("7.5GB", 18, 66), ("4.4GB", 30, 65), ("3.3GB", 38, 62)],  # Q8_0, Q4_K_M, Q3_K_M on AGX Orin 64GB
)
def test_published_mbu_on_agx_orin(weights, measured, published_pct):
    data = decode_json("--weights", weights, "--device", "jetson-agx-orin-64gb", "--measured", str(measured))
    assert data["mbu_pct"] == pytest.approx(published_pct, rel=0.02)
    assert data["warning"] is None


def test_params_and_bits():
    data = decode_json("--params", "7B", "--bits", "4.8", "--bandwidth", "3.35TB/s")
    assert data["weight_bytes"] == pytest.approx(7e9 * 4.8 / 8)


def test_kv_cache_and_batch():
    kv = kv_cache_bytes(layers=32, kv_heads=8, head_dim=128, context=8192, kv_bits=16)
    assert kv == 2 * 32 * 8 * 128 * 8192 * 2  # 1 GiB per sequence (Llama-3-8B at 8k)
    result = decode_ceiling(4.5e9, 3.35e12, kv, batch=8)
    assert result.bytes_per_step == pytest.approx(4.5e9 + 8 * kv)
    assert result.ceiling_tokens_per_s == pytest.approx(8 * 3.35e12 / (4.5e9 + 8 * kv))
    assert result.bytes_per_token == pytest.approx((4.5e9 + 8 * kv) / 8)


def test_mbu_above_100_is_flagged():
    data = decode_json("--weights", "4.2GB", "--gpu", "h100-sxm", "--measured", "1000")
    assert data["mbu_pct"] > 100 and "above 100%" in data["warning"]


def test_units():
    assert parse_bytes("4.2GB") == 4.2e9
    assert parse_bytes("3.56 GiB") == 3.56 * 2**30
    assert parse_bytes("204.8GB/s") == pytest.approx(204.8e9)
    assert parse_bytes("3.35TB/s") == pytest.approx(3.35e12)
    assert parse_count("6.74B") == pytest.approx(6.74e9)
    with pytest.raises(UsageError):
        parse_bytes("lots")
    # A bare number gets an example in its own scale, not a unit glued onto it ("960e9TB/s").
    with pytest.raises(UsageError, match=r"write it like 960GB/s if it is bytes per second"):
        parse_bytes("960e9", "bandwidth")
    with pytest.raises(UsageError, match=r"write it like 3.35TB/s or 3.35GB/s"):
        parse_bytes("3.35", "bandwidth")


def test_with_a_tegrastats_log(realdata_file):
    log = realdata_file("tegrastats/agx_orin64_jp6_ts_Hanner123_a.log")
    data = decode_json("--weights", "4.2GB", "--tegrastats", str(log), "--measured", "20")
    assert data["bandwidth_source"].startswith("Jetson AGX Orin 64GB, inferred")
    teg = data["tegrastats"]
    assert teg["samples_gpu_busy"] > 0 and teg["emc_bandwidth_bytes_per_s_mean"] < 2e9
    assert teg["emc_bytes_per_token"] == pytest.approx(teg["emc_bandwidth_bytes_per_s_mean"] / 20)


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--weights", "4.2GB"], "no bandwidth"),
        (["--gpu", "h100-sxm"], "--weights"),
        (["--weights", "4.2GB", "--gpu", "h100-sxm", "--layers", "32"], "--kv-heads"),
        (["--weights", "big", "--gpu", "h100-sxm"], "cannot read weights"),
    ],
)
def test_bad_input(args, fragment):
    result = runner.invoke(app, ["decode", *args])
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: ") and fragment in result.stderr and "Traceback" not in result.stderr
