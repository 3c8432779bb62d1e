"""What a kernel is, from its name alone: its kind (GEMM, attention, ...), the bound that kind usually has, and a
display name that tells apart instantiations sharing one function name. Pure; a heuristic, and labelled as one.

Without Nsight Compute counters nothing in a timeline says why a kernel is slow, but its name says what it does:
elementwise, reduction and normalization kernels move bytes and do little arithmetic (memory-bound on every GPU since
Volta); large GEMMs and convolutions are compute-bound; GEMVs and decode attention are memory-bound.
"""

from __future__ import annotations

import functools
import re
from collections import defaultdict

from traceview.analyzer.names import normalise_kernel_name
from traceview.parsers.ncu_csv import closed_if_cut, short_kernel_name

# DeepEP's expert-parallel all-to-all (MoE dispatch and combine over NVLink and RDMA) lives in the namespaces
# `deep_ep::intranode`, `::internode` and `::internode_ll` (`dpsk::ep::internode::combine<…>` in DeepSeek's published
# traces); its routing layout (`…::layout::get_dispatch_layout`) is local work, not communication.
EXPERT_ALL_TO_ALL = r"\b(?:inter|intra)node(?:_ll)?::"
# TorchInductor names a fused Triton kernel after the ops it fused, collectives' neighbours included
# (`triton_poi_fused_add_all_reduce_bitwise_and_…` in a real vLLM trace): pointwise work, never a collective itself.
_INDUCTOR_FUSED = re.compile(r"triton_(?:poi|red|per)_", re.IGNORECASE)
# First match wins: attention kernels are often CUTLASS GEMMs inside, elementwise functors mention Add/Mul.
_KINDS: tuple[tuple[str, re.Pattern[str]], ...] = tuple((kind, re.compile(pattern, re.IGNORECASE)) for kind, pattern in (
    ("communication", r"nccl|nvshmem|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|cross_device_reduce|sendrecv|" + EXPERT_ALL_TO_ALL),
    ("attention", r"flash|fmha|attention|\battn|_attn|sdpa|paged_?att|xformers|mha_|_mha"),
    # Before GEMM: cuDNN's and TensorRT's convolutions are GEMMs inside (`implicit_convolve_sgemm`,
    # `xmma_fprop_implicit_gemm`: fprop/dgrad/wgrad are a convolution's passes); `conv` alone would match `convert`.
    ("convolution", r"convol|conv[123]d|_conv_|conv_fwd|conv_bwd|winograd|fft2d|im2col|cudnn|fprop|dgrad|wgrad|implicit_?gemm"),
    # Before GEMM too: TensorRT's pooling kernels are `xmma_pooling_*`. A pooling window is a small reduction.
    ("reduction", r"pooling|max_?pool|avg_?pool"),
    # llama.cpp's quantized matrix kernels are `mul_mat_vec_q` (MMVQ, the decode GEMV), `mul_mat_q` (MMQ) and
    # `dequantize_mul_mat_vec`; vLLM's are Marlin and the Triton `fused_moe_kernel`.
    ("gemm", (r"gemm|gemv|matmul|xmma|nvjet|cutlass|cublas|wgmma|hmma|s16816|s1688|h16816|tensorop|triton_tem|triton_mm|\bmm_|splitk|dot_kernel"
             r"|mul_mat|mmvq|marlin|fused_moe|moe_gemm")),
    # nvFuser names its kernels after the scheduler: `nvfuser_pointwise_…`, `nvfuser_reduction_…`, and the persistent
    # ones (`nvfuser_inner_persistent_f0_c1_r0_g0`) that hold a row in registers: layer norms and softmaxes.
    ("normalization", r"(layer|rms|batch|group|instance|weight|l2)_?norm|soft_?max|normaliz|norm_kernel|nvfuser_\w*persistent"),
    ("reduction", r"reduce|reduction|triton_red|triton_per|argmax|argmin|topk|cumsum|scan_kernel|\bsum_kernel"),
    ("elementwise", (r"elementwise|pointwise|triton_poi|fill|activation|gelu|silu|relu|dropout|distribution|philox|rand|rotary|rope|embedding|cast|arange|where"
                    r"|axpy|vec_?add|vector_?add|\bvadd|^add(?:_\w+)?$|\badd_kernel\b|swiglu|geglu|convert|quantize|dequant")),
    # llama.cpp's `k_get_rows` (the embedding lookup), `cpy_f32_f16`, `concat_f32`; vLLM's `reshape_and_cache` (KV writes).
    ("copy", r"copy|transpose|cat_?array|memcpy|gather|scatter|index|permut|contiguous|get_rows|cpy_|concat|reshape_and_cache"),
))

# The usual bound of each kind; `gemv`/decode attention are memory-bound (one pass over the weights or the KV cache).
LIKELY_BOUND = {
    "gemm": "compute", "convolution": "compute", "attention": "compute",
    "normalization": "memory", "reduction": "memory", "elementwise": "memory", "copy": "memory",
    "communication": "communication",
}
# Decode-shaped kernels read every weight or the whole KV cache once per token: llama.cpp's MMVQ (`mul_mat_vec_q`) and
# `flash_attn_ext_vec`, TensorRT-LLM's masked multi-head attention (`mmha`) and XQA.
_MEMORY_BOUND_GEMM = re.compile(r"gemv|gemvx|decode|paged|splitkv|split_kv|mul_mat_vec|mmvq|attn\w*_vec|masked_multihead|mmha|xqa",
                                re.IGNORECASE)


# Names that say the kernel issues tensor-core instructions (HMMA/IMMA/GMMA), from cuBLAS, CUTLASS, cuDNN and wmma code
# (`volta_h884gemm`: Volta's 8x8x4 HMMA). `xmma` is a library, not an instruction: its kernels say `tensor16x8x16`,
# `warpgroupsize` (Hopper's GMMA) or a tensor-core input type (`bf16bf16_bf16f32`, `f32f32_tf32f32`, `e4m3`);
# TensorRT's `sm50_xmma_pooling_…` has none of them (an SM 5.0 has no tensor cores).
TENSOR_NAME = re.compile(
    r"wgmma|wmma|hmma|imma|gmma|tensorop|tensor_op|s16816|h16816|s1688|h1688|h884|s884|i8816|i16832|f16816|bf16816|"
    r"xmma\w*?(?:tensor\d|warpgroup|bf16|f16|tf32|e4m3|e5m2|i8)|"
    r"mma\.sync|mma_sync|(?<![a-z])mma(?![a-z_])|_mma_|nvjet|_tc_|tensorcore|tensor_core",
    re.IGNORECASE,
)
# Names that say FP32 FMA on the CUDA cores instead. cuBLAS's and cuDNN's `xmma` kernels name their math instruction,
# `_ffma_` (sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x256x8_stage3_warpsize1x4x1_ffma_…) or `_tensor16x8x16_`;
# `sgemm` (ampere_sgemm_128x64_tn, cuDNN's implicit_convolve_sgemm), cuDNN's `scudnn` (volta_scudnn_128x32_relu_…,
# where the tensor-core ones are h884cudnn, s1688cudnn) and CUTLASS's `simt` kernels are FP32 FMA unless the name
# also names tensor-core instructions (a hand-written `sgemm_wmma`).
FFMA_NAME = re.compile(r"ffma", re.IGNORECASE)
# A whole word's start: cuBLAS's `cublasGemmk1Params` holds "sGemm" inside a word.
FP32_FMA_NAME = re.compile(r"(?<![a-z])(?:simt|sgemm|scudnn)", re.IGNORECASE)


KIND_CHARS = 8192  # what a kernel does shows early in its name; scanning megabytes of a damaged name takes seconds


def kernel_kind(name: str) -> str:
    """Return the kind of work a kernel name says it does: gemm, attention, convolution, normalization, reduction,
    elementwise, copy, communication, or other.

    The function's own name is read first, then the name without its parameter list: the argument types describe
    what the kernel is given (`iterate_gpu(…, curandStatePhilox4_32_10 *)` generates no random numbers), while a
    generic function name (`cutlass::Kernel2<…s16816gemm…>`) leaves it to the template arguments."""
    head = name[:KIND_CHARS]
    for text in (short_kernel_name(head), _without_parameter_list(head)):
        for kind, pattern in _KINDS:
            if pattern.search(text):
                fused = _INDUCTOR_FUSED.search(text) if kind == "communication" else None
                # Inductor's prefix says what the kernel is: pointwise, or a (persistent) reduction.
                return kind if fused is None else "elementwise" if fused.group(0).lower() == "triton_poi_" else "reduction"
    return "other"


@functools.lru_cache(maxsize=4096)
def tensor_cores_by_name(name: str) -> bool | None:
    """Return whether a kernel's name says it runs on tensor cores: True, False where it names FP32 FMA on the CUDA
    cores (`_ffma_`, `sgemm`, `scudnn`, `simt`), None where it says neither. Cached: every launch of a kernel asks
    with the same name."""
    head = name[:KIND_CHARS]
    if FFMA_NAME.search(head):
        return False
    if TENSOR_NAME.search(head):
        return True
    return False if FP32_FMA_NAME.search(head) else None


def _without_parameter_list(name: str) -> str:
    """Return a demangled name without its trailing parameter list: the argument types (`curandStatePhilox4_32_10 *`,
    `cudnnTensorStruct`) say what the kernel is given, not what it does; namespaces and template arguments stay."""
    text = name.rstrip()
    if not text.endswith(")"):
        return text
    depth = 0
    for index in range(len(text) - 1, -1, -1):
        if text[index] == ")":
            depth += 1
        elif text[index] == "(":
            depth -= 1
            if depth == 0:
                return text[:index]
    return text


def likely_bound(name: str, kind: str) -> str | None:
    """Return the bound a kernel of this kind usually has (compute, memory, communication), or None for `other`."""
    if kind in ("gemm", "attention") and _MEMORY_BOUND_GEMM.search(name[:KIND_CHARS]):
        return "memory"
    return LIKELY_BOUND.get(kind)


def is_communication(name: str) -> bool:
    """True for collective-communication kernels (NCCL and its peers), which count as communication, not compute."""
    head = name[:KIND_CHARS]
    return _KINDS[0][1].search(head) is not None and _INDUCTOR_FUSED.search(head) is None


_ANONYMOUS = re.compile(r"(<unnamed>|\(anonymous namespace\))::")


def _template_arguments(name: str, short: str) -> list[str]:
    """Return the top-level template arguments of the kernel function `short` in a demangled name ([] if none). In a
    name a report cut short, the argument it was cut in ends with `…`, and so does the list."""
    text = _ANONYMOUS.sub("", name.strip())
    cut = closed_if_cut(text) != text
    text = text.removesuffix("…").removesuffix("...") if cut else text
    start = text.find(short + "<")
    if start < 0:
        return []
    start += len(short)
    arguments, depth, current = [], 0, ""
    for char in text[start + 1:]:
        if char in "<([":
            depth += 1
        elif char in ">)]":
            if depth == 0:
                arguments.append(current.strip())
                return arguments
            depth -= 1
        if char == "," and depth == 0:
            arguments.append(current.strip())
            current = ""
        else:
            current += char
    return arguments + [current.strip() + "…"] if cut else arguments


def _agree_as_far_as_shown(values: list[str]) -> bool:
    """True when the values of one template argument agree, a cut one (ending in `…`) agreeing with any value that
    starts with what is left of it: a report's cut is no difference between instantiations."""
    whole = {value for value in values if not value.endswith("…")}
    shown = [value.removesuffix("…") for value in values if value.endswith("…")]
    if len(whole) > 1:
        return False
    reference = next(iter(whole)) if whole else max(shown, key=len, default="")
    return all(reference.startswith(part) for part in shown)


def _readable_argument(argument: str, limit: int = 48) -> str:
    """Shorten one template argument: no namespaces, casts, lambda paths or parameter lists, at most `limit` chars."""
    text = normalise_kernel_name(_ANONYMOUS.sub("", argument))
    lambdas = re.findall(r"\[lambda\(([^)]*)\)", text)
    text = re.sub(r"::\[lambda.*$", "", text)
    previous = None
    while previous != text:  # parameter lists, innermost first
        previous, text = text, re.sub(r"\([^()]*\)", "", text)
    text = re.sub(r"^void\s+", "", text).strip()
    wrapper = re.match(r"^gpu_kernel_impl\w*<(.*)>$", text)
    if wrapper:
        text = wrapper.group(1)
    if lambdas and lambdas[-1]:  # a lambda's argument types tell its float and long instantiations apart
        text += f"({lambdas[-1]})"
    return text if len(text) <= limit else text[: limit - 1] + "…"


# Function names that say nothing of the kernel: cuBLAS's `internal::gemvx::kernel` and its namespace-less
# `kernel<int, int, __half, …, cublasGemvParamsEx<…>>`, CUTLASS's `cutlass::Kernel2` and `cutlass::device_kernel`,
# `kernel_impl`. The namespace or class before them does, else the template argument that names a type of its own.
_GENERIC_FUNCTION = re.compile(r"^(?:device_|global_|cuda_|gpu_)?[Kk]ernel(?:_?impl)?\d*$")
# Template arguments that name no type of their own: built-in and CUDA scalar types, numbers, booleans; matched
# against the argument with one space a gap.
_SCALAR_ARGUMENT = re.compile(
    r"^(?:const |volatile |unsigned |signed )*(?:void|bool|char|short|int|long|float|double|half|__half2?|__nv_bfloat162?|"
    r"__nv_fp8\w*|__nv_fp4\w*|nv_bfloat16|bfloat16|[cu]?int\d+_t|size_t|ptrdiff_t|true|false|-?\d[\w.]*|\(\w+\)-?\d+)"
    r"(?: (?:long|int|const))* ?[*&]* ?(?:const)?$")


def _naming_argument(full_name: str, short: str) -> str | None:
    """Return `<…cublasGemvParamsEx…>`: the first top-level template argument of `short` that names a type of its own
    (its bare name), with ellipses for the arguments left out; None when every argument is a scalar or a number."""
    arguments = _template_arguments(full_name, short)
    for position, argument in enumerate(arguments):
        text = " ".join(argument.removesuffix("…").split())  # one space a gap: the pattern then runs in linear time
        if not text or _SCALAR_ARGUMENT.match(text):
            continue
        name = re.match(r"(?:(?:const|volatile|struct|class)\s+)*((?:\w+::)*\w+)", text)
        if name is None:
            continue
        bare = name.group(1).rsplit("::", 1)[-1]
        before = "…" if position > 0 else ""
        after = "…" if position < len(arguments) - 1 or len(text) > name.end() else ""
        return f"<{before}{bare}{after}>"
    return None


def _qualified(full_name: str, short: str) -> str:
    """Return `gemvx::kernel` (or, with no namespace, `kernel<…cublasGemvParamsEx…>`) for a kernel whose function name
    is generic (_GENERIC_FUNCTION), else the short name."""
    if not _GENERIC_FUNCTION.match(short):
        return short
    match = re.search(r"(\w+)::" + re.escape(short) + r"(?=[<(]|$)", _ANONYMOUS.sub("", full_name))
    if match:
        return f"{match.group(1)}::{short}"
    naming = _naming_argument(full_name, short)
    return f"{short}{naming}" if naming else short


def display_names(full_names: list[str], short_names: list[str]) -> list[str]:
    """Return a name per kernel that tells apart the instantiations sharing one short name.

    `vectorized_elementwise_kernel` ×20 becomes `vectorized_elementwise_kernel<AddFunctor<float>>`, ...: the short
    name plus the template arguments that differ within the group (at most two); `#2`, `#3` where even those agree.
    A generic function name keeps the namespace before it (`gemvx::kernel<7>`, not `kernel<7>`).
    """
    groups: dict[str, list[int]] = defaultdict(list)
    for index, short in enumerate(short_names):
        groups[short].append(index)
    result = [_qualified(full, short) for full, short in zip(full_names, short_names, strict=True)]
    for short, members in groups.items():
        if len({full_names[i] for i in members}) < 2:
            continue
        arguments = [_template_arguments(full_names[i], short) for i in members]
        width = max(len(a) for a in arguments)

        def value(args: list[str], position: int) -> str:
            # Past the end of a cut list, the argument is unknown, not absent.
            return args[position] if position < len(args) else ("…" if args and args[-1].endswith("…") else "")

        varying = [p for p in range(width) if not _agree_as_far_as_shown([value(a, p) for a in arguments])][:2]
        seen: dict[str, int] = defaultdict(int)
        for index, args in zip(members, arguments, strict=True):
            label = result[index]
            if varying:
                shown = ", ".join(_readable_argument(closed_if_cut(value(args, p))) for p in varying)
                # A generic name already shows its naming argument (`kernel<…cublasGemvParamsEx…>`): one list, not two.
                label = f"{label[:-1]}; {shown}>" if label.endswith(">") and label != short else f"{label}<{shown}>"
            seen[label] += 1
            result[index] = label if seen[label] == 1 else f"{label} #{seen[label]}"
    return result
