"""Built-in GPU table (datasheet peaks, dense) and lookup by name or compute capability.

Figures are vendor datasheet values at boost clock unless the note says "derived" (SM count × per-SM rate ×
clock). Tensor FP16/BF16 is with FP32 accumulate (GeForce parts run FP16 accumulate at 2×).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from traceview.errors import UsageError

TERA = 1e12
GIGA = 1e9


@dataclass(frozen=True)
class GpuSpec:
    """Datasheet peaks of one GPU: FLOP/s (or op/s for INT8) and DRAM bytes/s."""

    key: str  # what --gpu takes
    name: str
    compute_capability: str
    sm_count: int | None
    dram_bytes_per_s: float
    fp64_flop_per_s: float | None
    fp32_flop_per_s: float | None
    tensor_fp16_flop_per_s: float | None  # FP16/BF16 tensor core, FP32 accumulate, dense
    tensor_tf32_flop_per_s: float | None
    tensor_fp8_flop_per_s: float | None
    tensor_int8_op_per_s: float | None
    patterns: tuple[str, ...]  # regexes over the normalised device name
    source: str
    is_jetson: bool = False
    memory_gb: float | None = None  # a Jetson module's memory, which tells modules of one name apart


def _spec(key: str, name: str, cc: str, sms: int | None, bw_gb: float, fp64: float | None, fp32: float | None,
          tf16: float | None, tf32: float | None, fp8: float | None, int8: float | None, patterns: tuple[str, ...],
          source: str, jetson: bool = False, memory_gb: float | None = None) -> GpuSpec:
    def tera(value: float | None) -> float | None:
        return None if value is None else value * TERA

    return GpuSpec(key, name, cc, sms, bw_gb * GIGA, tera(fp64), tera(fp32), tera(tf16), tera(tf32), tera(fp8),
                   tera(int8), patterns, source, jetson, memory_gb)


# GeForce figures follow each architecture's whitepaper: boost-clock FP32 from SM count × clock; FP16/BF16 tensor
# with FP32 accumulate, TF32, FP8 and INT8 at the whitepaper's ratios to FP32 for that generation's GeForce parts
# (the same ratios as the flagship entries below, whose whitepaper lists them).
_GEFORCE_TURING = "NVIDIA Turing whitepaper ratios (FP32-accumulate tensor 4x FP32, INT8 16x; reference clocks)"
_GEFORCE_AMPERE = "NVIDIA GA102 whitepaper ratios (tensor FP32-accumulate 2x FP32, TF32 1x, INT8 8x)"
_GEFORCE_ADA = "NVIDIA Ada whitepaper ratios (tensor FP32-accumulate 2x FP32, TF32 1x, FP8 4x, INT8 8x)"
_GEFORCE_BLACKWELL = "NVIDIA RTX Blackwell whitepaper ratios (tensor FP32-accumulate 2x FP32, TF32 1x, FP8 4x, INT8 8x)"

# Every Orin module's GPU is named "Orin" (ncu, CUDA) or "Orin (nvgpu)" (nsys, nvidia-smi), "NVIDIA Tegra Orin (nvgpu)"
# to Vulkan: an nsys export's memory size tells them apart (find_module; the Orin Nano's clock sets by the GPU clock),
# else the SM count, which a power mode can lower; the 64 GB AGX Orin is taken when neither does. Xavier modules are
# named the same way; the Nano and the TX1 are both "NVIDIA Tegra X1", the TX2 "NVIDIA Tegra X2".
_ORIN = r"^(tegra )?orin( nvgpu)?$"
_XAVIER = r"^(tegra )?xavier( nvgpu)?$"
_TEGRA_X1 = r"^tegra x1( rev [a-z])?( nvgpu)?$"
_JETSON_DERIVED = "NVIDIA Jetson module datasheet (cores, clock, memory); FP32 derived as cores x 2 x max GPU clock"

# Order matters for name lookup: specific variants before their families. GeForce patterns are anchored: a SUPER
# or Ti card is another product, and laptop parts are refused before the patterns are tried (find_by_name).
GPUS: tuple[GpuSpec, ...] = (
    _spec("v100-sxm2", "Tesla V100 SXM2", "7.0", 80, 900, 7.8, 15.7, 125, None, None, None,
          (r"v100.*sxm", r"^v100( \d+gb)?$", r"v100 dgxs"), "NVIDIA V100 datasheet; FP16 tensor only (no BF16)"),
    _spec("v100-pcie", "Tesla V100 PCIe", "7.0", 80, 900, 7.0, 14.0, 112, None, None, None,
          (r"v100.*pcie",), "NVIDIA V100 datasheet"),
    _spec("titan-rtx", "TITAN RTX", "7.5", 72, 672, 0.51, 16.3, 130.5, None, None, 261, (r"^titan rtx$",),
          "NVIDIA Turing whitepaper (TITAN and Quadro run FP32-accumulate tensor math at full rate)"),
    _spec("quadro-rtx8000", "Quadro RTX 8000 / 6000", "7.5", 72, 672, 0.51, 16.3, 130.5, None, None, 261, (r"^rtx [68]000$",),
          "NVIDIA Quadro RTX 8000 and 6000 datasheets (same TU102 configuration)"),
    _spec("rtx2080ti", "GeForce RTX 2080 Ti", "7.5", 68, 616, 0.42, 13.4, 53.8, None, None, 215.2, (r"^rtx 2080 ti$",), _GEFORCE_TURING),
    _spec("rtx2070super", "GeForce RTX 2070 SUPER", "7.5", 40, 448, 0.28, 9.1, 36.3, None, None, 145, (r"^rtx 2070 super$",), _GEFORCE_TURING),
    _spec("rtx2060super", "GeForce RTX 2060 SUPER", "7.5", 34, 448, 0.22, 7.18, 28.7, None, None, 114.9, (r"^rtx 2060 super$",),
          _GEFORCE_TURING + "; NVIDIA RTX 2060 SUPER specifications (2176 cores, 1650 MHz boost, 8 GB GDDR6 256-bit at 14 Gbps)"),
    _spec("rtx2060", "GeForce RTX 2060", "7.5", 30, 336, 0.2, 6.5, 25.8, None, None, 103.2, (r"^rtx 2060$",), _GEFORCE_TURING),
    _spec("gtx1660ti", "GeForce GTX 1660 Ti", "7.5", 24, 288, 0.17, 5.44, None, None, None, None, (r"^gtx 1660 ti$",),
          "NVIDIA GeForce GTX 1660 Ti specifications (1536 cores, 1770 MHz boost, 6 GB GDDR6 192-bit at 12 Gbps; FP32 derived); "
          "TU116 has no tensor cores"),
    _spec("gtx1660super", "GeForce GTX 1660 SUPER", "7.5", 22, 336, None, 5.03, None, None, None, None, (r"^gtx 1660 super$",),
          "NVIDIA GeForce GTX 1660 SUPER specifications (1408 cores, 1785 MHz boost; FP32 derived); TU116 has no tensor cores"),
    _spec("t4", "Tesla T4", "7.5", 40, 320, 0.25, 8.1, 65, None, None, 130, (r"\bt4\b",), "NVIDIA T4 datasheet"),
    # Pascal and Kepler: Nsight Compute does not profile them, nvprof does (traceview reads its --metrics results).
    # GeForce Pascal runs FP64 at 1/32 and FP16 at 1/64 of its FP32 rate; none of them has tensor cores.
    _spec("p100-sxm2", "Tesla P100 SXM2", "6.0", 56, 732, 5.3, 10.6, None, None, None, None, (r"p100.*sxm",),
          "NVIDIA Tesla P100 datasheet (NVLink); FP16 21.2 TFLOP/s on the FP32 pipes, no tensor cores"),
    _spec("p100-pcie-16gb", "Tesla P100 PCIe 16GB", "6.0", 56, 732, 4.7, 9.3, None, None, None, None, (r"p100.*pcie.*16\s?gb",),
          "NVIDIA Tesla P100 datasheet (PCIe, 16 GB CoWoS HBM2)"),
    _spec("p100-pcie-12gb", "Tesla P100 PCIe 12GB", "6.0", 56, 549, 4.7, 9.3, None, None, None, None, (r"p100.*pcie.*12\s?gb",),
          "NVIDIA Tesla P100 datasheet (PCIe, 12 GB CoWoS HBM2)"),
    _spec("gtx1080ti", "GeForce GTX 1080 Ti", "6.1", 28, 484, 0.354, 11.34, None, None, None, None, (r"^gtx 1080 ti$",),
          "NVIDIA GeForce GTX 1080 Ti specifications (3584 cores, 1582 MHz boost, 11 Gbps x 352-bit); FP32 derived, FP64 1/32"),
    _spec("gtx1080", "GeForce GTX 1080", "6.1", 20, 320, 0.277, 8.87, None, None, None, None, (r"^gtx 1080$",),
          "NVIDIA GP104 whitepaper (GTX 1080: 2560 cores, 1733 MHz boost, 8873 GFLOPS, 320 GB/s); FP64 1/32"),
    _spec("gtx1070", "GeForce GTX 1070", "6.1", 15, 256, 0.202, 6.46, None, None, None, None, (r"^gtx 1070$",),
          "NVIDIA GP104 whitepaper (GTX 1070: 1920 cores, 1683 MHz boost, 6463 GFLOPS, 256 GB/s); FP64 1/32"),
    _spec("gtx1060-6gb", "GeForce GTX 1060 6GB", "6.1", 10, 192, 0.137, 4.37, None, None, None, None, (r"^gtx 1060 6gb$",),
          "NVIDIA GeForce GTX 1060 specifications (1280 cores, 1708 MHz boost, 8 Gbps x 192-bit); FP32 derived, FP64 1/32"),
    _spec("gtx1050ti", "GeForce GTX 1050 Ti", "6.1", 6, 112, 0.067, 2.14, None, None, None, None, (r"^gtx 1050 ti$",),
          "NVIDIA GeForce GTX 1050 Ti specifications (768 cores, 1392 MHz boost, 7 Gbps x 128-bit); FP32 derived, FP64 1/32"),
    _spec("gtx1050", "GeForce GTX 1050", "6.1", 5, 112, 0.058, 1.86, None, None, None, None, (r"^gtx 1050$",),
          "NVIDIA GeForce GTX 1050 specifications (640 cores, 1455 MHz boost, 7 Gbps x 128-bit); FP32 derived, FP64 1/32"),
    _spec("k80", "Tesla K80 (one of its two GPUs)", "3.7", 13, 240, 1.455, 4.365, None, None, None, None, (r"\bk80\b",),
          "NVIDIA Tesla K80 datasheet (2.91 / 8.73 TFLOP/s FP64 / FP32 at boost and 480 GB/s per board of two GK210 GPUs, halved)"),
    _spec("k20c", "Tesla K20c / K20m", "3.5", 13, 208, 1.17, 3.52, None, None, None, None, (r"\bk20[cm]?\b",),
          "NVIDIA Tesla K20 datasheet (2496 cores, 706 MHz, 5 GB GDDR5 at 208 GB/s)"),
    _spec("a100-80gb-pcie", "A100 80GB PCIe", "8.0", 108, 1935, 9.7, 19.5, 312, 156, None, 624,
          (r"a100.*80gb.*pcie", r"a100.*pcie.*80gb"), "NVIDIA A100 datasheet"),
    _spec("a100-80gb", "A100 80GB SXM", "8.0", 108, 2039, 9.7, 19.5, 312, 156, None, 624,
          (r"a100.*80gb",), "NVIDIA A100 datasheet"),
    _spec("a100-40gb", "A100 40GB", "8.0", 108, 1555, 9.7, 19.5, 312, 156, None, 624,
          (r"a100",), "NVIDIA A100 datasheet (40GB SXM; PCIe 40GB has the same bandwidth)"),
    _spec("a30", "A30", "8.0", 56, 933, 5.2, 10.3, 165, 82, None, 330, (r"\ba30\b",), "NVIDIA A30 datasheet"),
    _spec("a10g", "A10G", "8.6", 80, 600, None, None, None, None, None, None, (r"\ba10g\b",),
          "AWS G5 instances (24 GB GDDR6, 600 GB/s); NVIDIA publishes no compute peaks for this AWS part"),
    _spec("a10", "A10", "8.6", 72, 600, None, 31.2, 125, 62.5, None, 250, (r"\ba10\b",), "NVIDIA A10 datasheet"),
    _spec("a40", "A40", "8.6", 84, 696, None, 37.4, 149.7, 74.8, None, 299.3, (r"\ba40\b",), "NVIDIA A40 datasheet"),
    _spec("rtx-a6000", "RTX A6000", "8.6", 84, 768, None, 38.7, 154.8, 77.4, None, 309.7, (r"^rtx a6000$",),
          "NVIDIA RTX A6000 datasheet (its 309.7 TFLOPS tensor figure is sparse FP16: halved); TF32 and INT8 at the A40's ratios"),
    _spec("rtx-a5000", "RTX A5000", "8.6", 64, 768, None, 27.8, 111.1, 55.6, None, 222.2, (r"^rtx a5000$",),
          "NVIDIA RTX A5000 datasheet (its 222.2 TFLOPS tensor figure is sparse FP16: halved); TF32 and INT8 at the A40's ratios"),
    _spec("rtx-a4000", "RTX A4000", "8.6", 48, 448, None, 19.2, 76.7, 38.4, None, 153.4, (r"^rtx a4000$",),
          "NVIDIA RTX A4000 datasheet (its 153.4 TFLOPS tensor figure is sparse FP16: halved); TF32 and INT8 at the A40's ratios"),
    _spec("rtx3090ti", "GeForce RTX 3090 Ti", "8.6", 84, 1008, 0.63, 40.0, 80, 40, None, 320,
          (r"^rtx 3090 ti$",), "NVIDIA RTX 3090 Ti specifications; tensor = GA102 whitepaper rates at FP32 accumulate"),
    _spec("rtx3090", "GeForce RTX 3090", "8.6", 82, 936, 0.56, 35.6, 71, 35.6, None, 284,
          (r"^rtx 3090$",), "NVIDIA GA102 whitepaper"),
    _spec("rtx3080ti", "GeForce RTX 3080 Ti", "8.6", 80, 912, 0.53, 34.1, 68.2, 34.1, None, 272.8,
          (r"^rtx 3080 ti$",), _GEFORCE_AMPERE),
    _spec("rtx3080", "GeForce RTX 3080", "8.6", 68, 760, 0.47, 29.8, 59.5, 29.8, None, 238,
          (r"^rtx 3080$",), _GEFORCE_AMPERE + "; the 10 GB card (the 12 GB one, same name, has 912 GB/s and 70 SMs)"),
    _spec("rtx3070ti", "GeForce RTX 3070 Ti", "8.6", 48, 608, 0.34, 21.7, 43.5, 21.7, None, 174,
          (r"^rtx 3070 ti$",), _GEFORCE_AMPERE),
    _spec("rtx3070", "GeForce RTX 3070", "8.6", 46, 448, 0.32, 20.3, 40.6, 20.3, None, 162.6,
          (r"^rtx 3070$",), _GEFORCE_AMPERE),
    _spec("rtx3060ti", "GeForce RTX 3060 Ti", "8.6", 38, 448, 0.25, 16.2, 32.4, 16.2, None, 129.6,
          (r"^rtx 3060 ti$",), _GEFORCE_AMPERE),
    _spec("rtx3060", "GeForce RTX 3060", "8.6", 28, 360, 0.2, 12.7, 25.5, 12.7, None, 101.9,
          (r"^rtx 3060$",), _GEFORCE_AMPERE + "; the 12 GB card (the 8 GB one, same name, has 240 GB/s)"),
    _spec("jetson-agx-orin-64gb", "Jetson AGX Orin 64GB", "8.7", 16, 204.8, None, 5.3, 42.6, 21, None, 85,
          (r"agx orin.*64", _ORIN), "NVIDIA Jetson modules page; tensor and INT8 derived", True, 64),
    _spec("jetson-agx-orin-32gb", "Jetson AGX Orin 32GB", "8.7", 14, 204.8, None, 3.3, 26.7, 13, None, 53,
          (r"agx orin.*32", _ORIN), "NVIDIA Jetson modules page; tensor and INT8 derived", True, 32),
    # The NX 8GB has the Orin Nano 8GB's memory, bandwidth and SM count: CUDA's "Orin" cannot tell them apart, so only
    # its own name (a board inferred from a tegrastats log, or --gpu) picks it.
    _spec("jetson-orin-nx-8gb", "Jetson Orin NX 8GB", "8.7", 8, 102.4, None, 1.57, 12.5, 6.25, None, 25,
          (r"orin nx.*\b8 ?gb",), "Jetson Orin NX datasheet (1024 cores at 765 MHz before Super mode, 102.4 GB/s); FP32 derived; tensor "
          "and INT8 at the NX 16GB entry's per-clock rates", True, 8),
    _spec("jetson-orin-nx-16gb", "Jetson Orin NX 16GB", "8.7", 8, 102.4, None, 1.88, 15.0, 7.5, None, 30,
          (r"orin nx", _ORIN), "NVIDIA Jetson modules page; tensor and INT8 derived", True, 16),
    # The module at its clocks before Super mode (GPU 625 MHz, memory 2133 MHz: 68 GB/s; 20 dense INT8 TOPS), chosen
    # from a tegrastats log's memory clock (jetson.infer_board), never by a device name, which is the same.
    # The 4 GB module has half the 8 GB one's GPU (512 cores, 4 SMs) and memory bus (64-bit): 51 GB/s in Super mode, 34
    # before it.
    _spec("jetson-orin-nano-4gb-pre-super", "Jetson Orin Nano 4GB (before Super mode)", "8.7", 4, 34.1, None, 0.64, 5.1, 2.55, None, 10,
          (r"orin nano.*\b4 ?gb.*pre.?super",), "Jetson Orin Nano datasheet (512 cores at 625 MHz, 64-bit LPDDR5 at 2133 MHz: 34 GB/s; "
          "20 sparse INT8 TOPS); FP32 derived, tensor at the 8GB entry's per-SM rates", True, 4),
    _spec("jetson-orin-nano-8gb-pre-super", "Jetson Orin Nano 8GB (before Super mode)", "8.7", 8, 68.3, None, 1.28, 10.2, 5.1, None, 20,
          (r"orin nano.*pre.?super",), "Jetson Orin Nano datasheet (625 MHz GPU, 68 GB/s, 20 INT8 TOPS dense); FP32 and tensor at "
          "the Super entry's per-clock rates", True, 8),
    _spec("jetson-orin-nano-8gb", "Jetson Orin Nano 8GB (Super)", "8.7", 8, 102.0, None, 2.09, 16.7, 8.4, None, 33,
          (r"orin nano(?!.*\b4 ?gb)", _ORIN), "Orin Nano Super datasheet summary (JetPack 6.1+ clocks); derived tensor", True, 8),
    _spec("jetson-orin-nano-4gb", "Jetson Orin Nano 4GB (Super)", "8.7", 4, 51.2, None, 1.04, 8.35, 4.2, None, 17,
          (r"orin nano.*\b4 ?gb", _ORIN), "Orin Nano Super datasheet summary (512 cores at 1020 MHz, 64-bit LPDDR5 at 3200 MHz: 51 GB/s; "
          "34 sparse INT8 TOPS); FP32 derived, tensor at the 8GB entry's per-SM rates", True, 4),
    _spec("jetson-agx-xavier", "Jetson AGX Xavier", "7.2", 8, 136.5, None, 1.41, 11.0, None, None, 22.0, (r"agx xavier", _XAVIER),
          "NVIDIA Jetson AGX Xavier datasheet (512 CUDA cores, 64 Tensor Cores, 1377 MHz: 11 TFLOPS FP16, 22 TOPS INT8 on the "
          "GPU); FP32 derived", True),
    _spec("jetson-xavier-nx", "Jetson Xavier NX", "7.2", 6, 51.2, None, 0.845, 6.76, None, None, 13.5, (r"xavier nx", _XAVIER),
          _JETSON_DERIVED + " (384 cores, 48 Tensor Cores, 1100 MHz); tensor FP16 and INT8 derived at the AGX Xavier's per-core "
          "rates (its 21 TOPS count the DLAs)", True),
    _spec("jetson-tx2", "Jetson TX2", "6.2", 2, 59.7, None, 0.665, None, None, None, None, (r"jetson tx2", r"^tegra x2( nvgpu)?$"),
          _JETSON_DERIVED + " (256 Pascal cores, 1300 MHz); no tensor cores", True),
    _spec("jetson-nano", "Jetson Nano 4GB", "5.3", 1, 25.6, None, 0.236, None, None, None, None, (r"jetson nano", _TEGRA_X1),
          _JETSON_DERIVED + " (128 Maxwell cores, 921.6 MHz); no tensor cores", True),
    _spec("jetson-tx1", "Jetson TX1", "5.3", 2, 25.6, None, 0.511, None, None, None, None, (r"jetson tx1", _TEGRA_X1),
          _JETSON_DERIVED + " (256 Maxwell cores, 998 MHz); no tensor cores", True),
    _spec("l4", "L4", "8.9", 58, 300, 0.49, 30.3, 121, 60, 242.5, 242.5, (r"\bl4\b",), "NVIDIA L4 datasheet"),
    _spec("l40s", "L40S", "8.9", 142, 864, 1.43, 91.6, 362, 183, 733, 733, (r"l40s",), "NVIDIA L40S datasheet"),
    _spec("l40", "L40", "8.9", 142, 864, None, 90.5, 181, 90.5, 362, 362, (r"^l40$",), "NVIDIA L40 datasheet"),
    _spec("rtx-6000-ada", "RTX 6000 Ada Generation", "8.9", 142, 960, None, 91.1, None, None, None, None, (r"^rtx 6000 ada( generation)?$",),
          "NVIDIA RTX 6000 Ada datasheet (48 GB GDDR6, 384-bit); its one tensor figure (1,457 TFLOPS, FP8 with sparsity) does not "
          "square with the L40's on the same chip: tensor peaks left out"),
    _spec("rtx4090", "GeForce RTX 4090", "8.9", 128, 1008, 1.29, 82.6, 165.2, 82.6, 330.3, 660.6,
          (r"^rtx 4090$",), "NVIDIA Ada whitepaper"),
    _spec("rtx4080", "GeForce RTX 4080", "8.9", 76, 716.8, 0.76, 48.7, 97.5, 48.7, 194.9, 389.9, (r"^rtx 4080$",), _GEFORCE_ADA),
    _spec("rtx4070ti", "GeForce RTX 4070 Ti", "8.9", 60, 504, 0.63, 40.1, 80.2, 40.1, 160.4, 320.8, (r"^rtx 4070 ti$",), _GEFORCE_ADA),
    _spec("rtx4070", "GeForce RTX 4070", "8.9", 46, 504, 0.45, 29.1, 58.3, 29.1, 116.6, 233.2, (r"^rtx 4070$",), _GEFORCE_ADA),
    _spec("rtx4060ti", "GeForce RTX 4060 Ti", "8.9", 34, 288, 0.34, 22.1, 44.1, 22.1, 88.3, 176.6, (r"^rtx 4060 ti$",), _GEFORCE_ADA),
    _spec("rtx4060", "GeForce RTX 4060", "8.9", 24, 272, 0.24, 15.1, 30.2, 15.1, 60.4, 120.8, (r"^rtx 4060$",), _GEFORCE_ADA),
    _spec("h100-nvl", "H100 NVL", "9.0", 132, 3938, 30, 60, 835.5, 417.5, 1670.5, 1670.5, (r"h100.*nvl",),
          "NVIDIA H100 NVL datasheet (per GPU, 94 GB HBM3; its tensor figures are sparse: halved)"),
    _spec("h100-pcie", "H100 PCIe", "9.0", 114, 2000, 26, 51, 756, 378, 1513, 1513, (r"h100.*pcie",),
          "NVIDIA H100 datasheet"),
    _spec("h100-sxm", "H100 SXM5", "9.0", 132, 3350, 34, 67, 989.4, 494.7, 1978.9, 1978.9,
          (r"h100",), "NVIDIA H100 datasheet (SXM5 80GB HBM3)"),
    # The export-market H100 SXM5 (China, 2023; DeepSeek's published traces ran on it): the same GH100 and HBM3, FP64 cut.
    _spec("h800", "H800 SXM5", "9.0", 132, 3350, 1, 67, 989.4, 494.7, 1978.9, 1978.9, (r"h800(?!.*pcie)",),
          "NVIDIA H800 figures as published for the China market (SXM5, 80 GB HBM3, 3.35 TB/s; FP32 and tensor as H100 SXM5; "
          "FP64 1 TFLOPS; NVLink 400 GB/s)"),
    # Before the H200: "gh200" contains "h200".
    _spec("gh200-144gb", "GH200 144GB HBM3e", "9.0", 132, 4900, 34, 67, 989.4, 494.7, 1978.9, 1978.9, (r"gh200.*144",),
          "NVIDIA GH200 datasheet (144 GB HBM3e; GPU compute as H100 SXM)"),
    _spec("gh200-96gb", "GH200 96GB HBM3", "9.0", 132, 4000, 34, 67, 989.4, 494.7, 1978.9, 1978.9, (r"gh200",),
          "NVIDIA GH200 datasheet (96 GB HBM3; GPU compute as H100 SXM)"),
    # The export-market Hopper (China): GH100 with 78 SMs enabled and 96 GB of HBM3. Before "h200": "h20" is its prefix.
    _spec("h20", "H20", "9.0", 78, 4000, 1, 44, 148, 74, 296, 296, (r"\bh20\b",),
          "NVIDIA H20 figures as published for the China market (96 GB HBM3, 4.0 TB/s; FP16/BF16 tensor 148 TFLOPS dense, "
          "TF32 74, FP8 and INT8 296, FP32 44, FP64 1); 78 SMs as profilers report them"),
    _spec("h200", "H200 SXM", "9.0", 132, 4800, 34, 67, 989.4, 494.7, 1978.9, 1978.9, (r"h200",),
          "NVIDIA H200 datasheet (GH100 compute as H100 SXM)"),
    # Not "gb200": the Grace Blackwell superchip's GPUs run at other power and clocks.
    _spec("b200", "B200", "10.0", 148, 8000, 40, 80, 2250, 1100, 4500, 4500, (r"(?<!g)b200",),
          "NVIDIA DGX B200 datasheet (HGX 1000 W)"),
    _spec("jetson-agx-thor", "Jetson AGX Thor (T5000)", "11.0", 20, 273, None, 8.1, None, None, None, None,
          (r"thor",), "LPDDR5X 256-bit; FP32 derived at 1.575 GHz; tensor peaks unverified, left out", True),
    # DGX Spark's GPU shares the Grace CPU's LPDDR5X, like a Jetson's: ncu has no DRAM counters for CC 12.1.
    _spec("gb10", "GB10 (DGX Spark)", "12.1", 48, 273, None, 31, None, None, None, None, (r"\bgb10\b",),
          "NVIDIA DGX Spark datasheet (128 GB LPDDR5X, 256-bit, 273 GB/s; 6,144 CUDA cores = 48 SMs); FP32 as NVIDIA gave it "
          "at Hot Chips 2025 (31 TFLOPS); its published tensor figure is FP4 with sparsity only, so the tensor peaks are left out"),
    _spec("rtx5090", "GeForce RTX 5090", "12.0", 170, 1792, 1.64, 104.8, 209.5, 104.8, 419, 838,
          (r"^rtx 5090$",), "NVIDIA RTX Blackwell whitepaper"),
    _spec("rtx-pro-6000-blackwell", "RTX PRO 6000 Blackwell", "12.0", 188, 1792, None, 125, None, None, None, None,
          (r"^rtx pro 6000 blackwell( workstation edition| server edition)?$",),
          "NVIDIA RTX PRO 6000 Blackwell Workstation Edition datasheet (96 GB GDDR7, 512-bit); its tensor figures are FP4 sparse "
          "only, left out"),
    _spec("rtx5080", "GeForce RTX 5080", "12.0", 84, 960, 0.88, 56.3, 112.6, 56.3, 225.1, 450.2, (r"^rtx 5080$",), _GEFORCE_BLACKWELL),
    _spec("rtx5070ti", "GeForce RTX 5070 Ti", "12.0", 70, 896, 0.69, 43.9, 87.9, 43.9, 175.8, 351.5, (r"^rtx 5070 ti$",), _GEFORCE_BLACKWELL),
    _spec("rtx5070", "GeForce RTX 5070", "12.0", 48, 672, 0.48, 30.9, 61.7, 30.9, 123.5, 246.9, (r"^rtx 5070$",), _GEFORCE_BLACKWELL),
    _spec("rtx5060ti", "GeForce RTX 5060 Ti", "12.0", 36, 448, 0.37, 23.7, 47.4, 23.7, 94.8, 189.6, (r"^rtx 5060 ti$",), _GEFORCE_BLACKWELL),
    _spec("rtx5060", "GeForce RTX 5060", "12.0", 30, 448, 0.3, 19.2, 38.4, 19.2, 76.7, 153.4, (r"^rtx 5060$",), _GEFORCE_BLACKWELL),
)


# The highest DRAM bandwidth of any product of each compute capability, GB/s (datasheets): K40/Titan Black, Titan X
# (Maxwell), TX1, P100, Titan Xp, TX2, V100S, Xavier, Quadro RTX 8000, A100 80GB, RTX 3090 Ti, AGX Orin, RTX 4090,
# H200/GH200, B200/B300, Thor, RTX 5090, DGX Spark. A bandwidth an export records above its generation's ceiling is
# a damaged or misread field (nsys 2020 wrote 4.03 TB/s for a Quadro RTX 8000), not a measurement.
MAX_DRAM_GB_S_BY_CC = {
    "3.5": 336, "3.7": 240, "5.0": 86.4, "5.2": 336.5, "5.3": 25.6, "6.0": 732, "6.1": 547.6, "6.2": 59.7, "7.0": 1134, "7.2": 136.5,
    "7.5": 672, "8.0": 2039, "8.6": 1008, "8.7": 204.8, "8.9": 1008, "9.0": 4900, "10.0": 8000, "10.3": 8000, "11.0": 273, "12.0": 1792,
    "12.1": 273,
}


def plausible_bandwidth(bytes_per_s: float, compute_capability: str | None) -> bool:
    """True unless the DRAM bandwidth (bytes/s) is over 10% above the fastest product of its compute capability;
    an unknown compute capability is not judged."""
    ceiling = MAX_DRAM_GB_S_BY_CC.get(compute_capability or "")
    return ceiling is None or bytes_per_s <= ceiling * GIGA * 1.1


def normalise_device_name(name: str) -> str:
    """Return a lower-case device name without vendor words and punctuation, for matching."""
    text = name.lower()
    text = re.sub(r"\b(nvidia|geforce|tesla|quadro)\b", " ", text)
    text = re.sub(r"[^a-z0-9]+", " ", text)
    return " ".join(text.split())


# A laptop GPU shares its desktop namesake's name but not its bus, clocks or SM count ("RTX 3070 Laptop GPU" has
# 40 SMs and up to 448 GB/s at the maker's chosen clock): no datasheet figure fits it.
_MOBILE_PART = re.compile(r"\b(laptop|mobile|max q|maxq)\b")


def find_by_name(name: str, sm_count: int | None = None) -> GpuSpec | None:
    """Return the table entry whose patterns match a device name as profilers print it, or None (also for laptop
    parts, whose peaks depend on the maker's configuration).

    `sm_count`, when the profile gives it, picks among entries of one name (every Jetson Orin module calls itself
    "Orin") and refuses a match whose SM count differs: a MIG slice or another variant sold under the same name
    (RTX 3080 12 GB) does not have the entry's peaks."""
    matches = namesakes(name, sm_count)
    return matches[0] if matches else None


def namesakes(name: str, sm_count: int | None = None) -> list[GpuSpec]:
    """Return every table entry a device name (and SM count, when given) fits, the one find_by_name takes first."""
    normalised = normalise_device_name(name)
    for spec in GPUS:
        if spec.key == name.strip().lower():
            return [spec]
    if _MOBILE_PART.search(normalised):
        return []
    matches = [spec for spec in GPUS if any(re.search(pattern, normalised) for pattern in spec.patterns)]
    if sm_count:
        matches = [spec for spec in matches if spec.sm_count is None or spec.sm_count == sm_count]
    return matches


def by_module_memory(matches: list[GpuSpec], memory_bytes: int | None) -> list[GpuSpec]:
    """Return the Jetson modules among `matches` whose memory is nearest the memory a profile records (which is a little
    under the module's: 7.99 GB for an 8 GB Orin Nano), or `matches` as they are when that does not decide (no module
    memory within a quarter of it). Memory, not SM count, tells Orin modules apart: a power mode that turns GPU TPCs
    off shows an AGX Orin with 8 SMs, an Orin NX's count."""
    sized = [spec for spec in matches if spec.memory_gb]
    if not memory_bytes or not sized:
        return matches
    recorded_gb = memory_bytes / GIGA
    nearest = min(abs(math.log(spec.memory_gb / recorded_gb)) for spec in sized)  # type: ignore[operator]
    if nearest > math.log(1.25):
        return matches
    return [spec for spec in sized if abs(math.log(spec.memory_gb / recorded_gb)) == nearest]  # type: ignore[operator]


# A Jetson module whose GPU clock, as CUDA reports it, tells its clock set apart: the Orin Nano's is 1020 MHz in
# Super mode and 625 MHz before it (its memory then runs at 2133 MHz: 68 GB/s instead of 102 on the 8GB, 34 instead of 51
# on the 4GB).
_BY_CLOCK = {"jetson-orin-nano-8gb": (700e6, "jetson-orin-nano-8gb-pre-super"), "jetson-orin-nano-4gb": (700e6, "jetson-orin-nano-4gb-pre-super")}
# Entries (and Jetson boards, keyed alike) asked for by their own key only: a family name means the module as sold.
CLOCK_VARIANTS = frozenset(variant for _, variant in _BY_CLOCK.values())


def find_module(name: str, sm_count: int | None, memory_bytes: int | None = None, integrated: bool = False,
                clock_hz: float | None = None) -> tuple[GpuSpec | None, str | None]:
    """Return the table entry of a GPU an export records, and a note (assumed_module_note) where its name still fits
    several GPUs of different bandwidth. A discrete GPU is matched by name and SM count (find_by_name); an integrated
    one (a Jetson, sharing the host's memory) by name and memory (by_module_memory), since a power mode lowers its SM
    count, and by its maximum GPU clock (`clock_hz`) where that tells a module's clock sets apart (_BY_CLOCK)."""
    if not integrated:
        return find_by_name(name, sm_count), None
    matches = by_module_memory(namesakes(name), memory_bytes)
    chosen = matches[0] if matches else None
    if chosen is not None and chosen.key in _BY_CLOCK and clock_hz and clock_hz <= _BY_CLOCK[chosen.key][0]:
        return lookup_gpu(_BY_CLOCK[chosen.key][1]), None
    return chosen, assumed_module_note(name, matches)


def assumed_module_note(name: str, matches: list[GpuSpec]) -> str | None:
    """Return a note when the GPUs a device name still fits (`matches`, the first taken) differ in bandwidth and nothing
    tells them apart (every Jetson Orin module is "Orin" to CUDA), saying which was assumed; None when they agree."""
    others = [spec for spec in matches[1:] if spec.dram_bytes_per_s != matches[0].dram_bytes_per_s]
    if not matches or not others:
        return None
    listed = ", ".join(f"{spec.name} {spec.dram_bytes_per_s / GIGA:,.1f} GB/s" for spec in others)
    return (f"\"{name}\" is the name of several GPUs: {matches[0].name} ({matches[0].dram_bytes_per_s / GIGA:,.1f} GB/s) was assumed, "
            f"not {listed}; pass --gpu KEY (see `traceview gpus`) for another")


def find_by_compute_capability(cc: str) -> list[GpuSpec]:
    """Return every table entry with this compute capability (e.g. "12.0")."""
    wanted = cc.strip()
    return [spec for spec in GPUS if spec.compute_capability == wanted]


def _family_members(name: str) -> list[GpuSpec]:
    """Entries whose key or name contains every word of a short user-given name (`a100` → all three A100s); a module
    at other clocks (CLOCK_VARIANTS) is asked for by its own key, so `orin nano 8gb` is the module as sold today."""
    words = normalise_device_name(name).split()
    members = [spec for spec in GPUS if words and all(w in normalise_device_name(spec.name).split() or w in spec.key.split("-") for w in words)]
    return [spec for spec in members if spec.key not in CLOCK_VARIANTS] or members


def lookup_gpu(name: str) -> GpuSpec:
    """Return the table entry for a --gpu value (a key such as `h100-sxm`, or a device name); a family name that
    fits several entries (`a100`, `h100`) is refused with the candidates, never silently resolved to one of them."""
    key = name.strip().lower()
    exact = next((spec for spec in GPUS if spec.key == key), None)
    if exact is not None:
        return exact
    members = _family_members(name)
    if len(members) > 1:
        raise UsageError(f"--gpu {name!r} fits several GPUs: {', '.join(m.key for m in members)} — give one of them (see `traceview gpus`)")
    spec = find_by_name(name)
    if spec is None:
        keys = ", ".join(spec.key for spec in GPUS)
        raise UsageError(f"unknown GPU {name!r} — choose one of: {keys} (see `traceview gpus`)")
    return spec


# Host link per GPU: PCIe generation and lanes (datasheets). Jetson boards share DRAM with the CPU and have none;
# GH200's GPU reaches the CPU over NVLink-C2C, not PCIe.
_PCIE_LINK: dict[str, tuple[int, int]] = {
    **{key: (3, 16) for key in ("v100-sxm2", "v100-pcie", "t4", "titan-rtx", "quadro-rtx8000", "rtx2080ti", "rtx2070super", "rtx2060super",
                                "rtx2060", "gtx1660super", "gtx1660ti", "p100-pcie-16gb", "p100-pcie-12gb", "gtx1080ti", "gtx1080",
                                "gtx1070", "gtx1060-6gb", "gtx1050ti", "gtx1050")},
    **{key: (3, 16) for key in ("p100-sxm2", "k80")},
    **{key: (2, 16) for key in ("k20c",)},
    **{key: (4, 16) for key in ("a100-80gb-pcie", "a100-80gb", "a100-40gb", "a30", "a10g", "a10", "a40", "rtx-a6000", "rtx-a5000",
                                "rtx-a4000", "rtx-6000-ada", "rtx3090ti",
                                "rtx3090", "rtx3080ti", "rtx3080", "rtx3070ti", "rtx3070", "rtx3060ti", "rtx3060", "l4", "l40s", "l40",
                                "rtx4090", "rtx4080", "rtx4070ti", "rtx4070")},
    **{key: (4, 8) for key in ("rtx4060ti", "rtx4060")},
    **{key: (5, 8) for key in ("rtx5060ti", "rtx5060")},
    **{key: (5, 16) for key in ("h100-nvl", "h100-pcie", "h100-sxm", "h800", "h200", "b200", "rtx5090", "rtx-pro-6000-blackwell", "rtx5080",
                                "rtx5070ti", "rtx5070")},
}


def host_link(spec: GpuSpec | None) -> tuple[float, str] | None:
    """Return (bytes/s per direction, e.g. "PCIe Gen5 x16") of the GPU's host link, or None when unknown or integrated.

    The per-direction figure is the datasheet's bidirectional bandwidth halved (Gen3 16, Gen4 32, Gen5 64 GB/s at x16),
    the number NVIDIA quotes; real pinned copies reach about 80-90% of it.
    """
    link = _PCIE_LINK.get(spec.key) if spec else None
    if link is None:
        return None
    generation, lanes = link
    return 1e9 * lanes * 2 ** (generation - 3), f"PCIe Gen{generation} x{lanes}"


def tensor_speedups(spec: GpuSpec | None) -> list[tuple[str, float]]:
    """Return the tensor-core precisions that beat FP32 FMA on this GPU with their datasheet ratio to its FP32 rate
    (dense, FP32 accumulate), fastest first: empty for a GPU without tensor cores or where the table lacks a rate."""
    if spec is None or not spec.fp32_flop_per_s:
        return []
    major = spec.compute_capability.split(".")[0]
    half = "BF16/FP16" if major.isdigit() and int(major) >= 8 else "FP16"  # Volta and Turing have FP16 tensor cores, no BF16
    rates = [(half, spec.tensor_fp16_flop_per_s), ("TF32", spec.tensor_tf32_flop_per_s)]
    # GeForce Ampere does TF32 at its FP32 rate: no gain, no advice.
    return sorted(((label, rate / spec.fp32_flop_per_s) for label, rate in rates if rate and rate > 1.05 * spec.fp32_flop_per_s),
                  key=lambda pair: -pair[1])
