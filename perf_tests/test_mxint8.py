"""Custom kernel: MXINT8 dequantization bandwidth, and FP32 vs MXINT8 weights in a Linear and an
encoder (latency, memory, output difference).

Dequantization is gated on device time against the same-size copy roofline; the Triton kernel,
the PyTorch reference and the reference under torch.compile are the three implementations.
The Linear layer runs dense, MXINT8 the lab's way (dequantize, then F.linear) and MXINT8 fused
(``mxint8_linear``: dequantized inside the matmul), each checked against float32 before timing.

Same-run ratios the gate checks (declared below with ``perfgate.Ratio``): each MXINT8 Linear's
latency relative to the dense one of the same shape, batch and dtype (so ``mxint8_fused-bf16``
over ``dense-bf16`` for the fused kernel), the encoder's relative to fp32, and the dequantization
kernel's fraction of the copy roofline. Each fused case also carries ``bf16_s`` (bf16 F.linear
timed in the same case) and ``floor_s`` (its 8.25-bit weight read at the measured copy bandwidth).
"""

from __future__ import annotations

import copy
import functools

import pytest
import torch
from torch import nn

from kernels.mxint8 import (
    MXINT8Linear,
    dequantize,
    dequantize_reference,
    relative_error,
    triton_available_for,
    tuned_config,
)
from kernels.mxint8.tuning import chosen_path, config_source
from perf_tests.models import BERT_BASE, BERT_SMALL, EncoderClassifier, quantize_linears
from perfgate import Ratio
from perfgate.measure.timing import (
    graph_seconds_per_call,
    l2_cache_bytes,
    record_rates,
    rotation_count,
    time_device,
    time_wall,
)

pytestmark = pytest.mark.perfgate(family="mxint8")
COPY_FRACTION = Ratio("fraction of the copy roofline", field="fraction_of_copy")

TIERED_PARAMETERS = {
    "elements": {
        ("cpu", "quick"): [2**12],
        ("cpu", "default"): [2**20, 2**22],
        ("cpu", "full"): [2**20, 2**22, 2**24],
        ("cuda", "quick"): [2**20],
        ("cuda", "default"): [2**20, 2**25, 2**28],
        ("cuda", "full"): [2**20, 2**22, 2**24, 2**25, 2**26, 2**28],
    },
    "weight_shape": {  # (out_features N, in_features K)
        ("cpu", "quick"): [(256, 256)],
        ("cpu", "default"): [(2048, 2048)],
        ("cpu", "full"): [(4096, 4096)],
        ("cuda", "quick"): [(4096, 4096)],
        ("cuda", "default"): [(4096, 4096)],
        ("cuda", "full"): [(4096, 4096), (14336, 4096)],
    },
    "batch": {
        ("cpu", "quick"): [16],
        ("cpu", "default"): [1, 16, 512],
        ("cpu", "full"): [1, 16, 512],
        ("cuda", "quick"): [16],
        ("cuda", "default"): [1, 16, 512],
        ("cuda", "full"): [1, 16, 512],
    },
    "encoder": {  # (config name, batch, sequence length)
        ("cpu", "quick"): [("bert-small", 1, 32)],
        ("cpu", "default"): [("bert-small", 2, 64)],
        ("cpu", "full"): [("bert-base", 2, 128)],
        ("cuda", "quick"): [("bert-small", 2, 64)],
        ("cuda", "default"): [("bert-base", 8, 128)],
        ("cuda", "full"): [("bert-base", 8, 128), ("bert-base", 32, 512)],
    },
}
ENCODERS = {"bert-small": BERT_SMALL, "bert-base": BERT_BASE}
GROUP_SIZES = [32, 128]
THEORETICAL_SAVING = 1 - (8 + 8 / 32) / 32  # 74.2 % at group 32


DEQUANTIZERS = {"triton": dequantize, "reference": dequantize_reference}


def make_dequantizer(implementation: str):
    """The function a case times; the compiled reference is compiled once, on the correctness
    check's call, before timing."""
    if implementation == "reference_compiled":
        return torch.compile(dequantize_reference, dynamic=False)
    return DEQUANTIZERS[implementation]


DEQUANTIZER_PARAMS = [
    "triton",
    "reference",
    # Inductor autotunes pointwise kernels by timing them, and its pick differs between processes:
    # on the H100 the same 2^22-element case read 6.3 us in one run and 9.0 us in the next.
    # Gate it loosely so that flip is not a regression; a fall back to eager (30x) still is.
    pytest.param("reference_compiled", marks=pytest.mark.perfgate(threshold=0.5)),
]


def random_mxint8(elements: int, group_size: int, device: torch.device):
    """Random mantissas over the whole int8 range and finite scales (never zeros)."""
    mantissa = torch.randint(-128, 128, (elements,), dtype=torch.int8, device=device)
    scales = torch.randint(100, 150, (elements // group_size,), device=device).to(torch.uint8)
    return mantissa, scales


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    both_nan = torch.isnan(a) & torch.isnan(b)
    return bool(((a.view(torch.int16) == b.view(torch.int16)) | both_nan).all())


@pytest.mark.perfgate(ratios=[COPY_FRACTION])
@pytest.mark.parametrize("group_size", GROUP_SIZES)
@pytest.mark.parametrize("implementation", DEQUANTIZER_PARAMS)
def test_dequantize(
    benchmark, bench_device, perf_budget, copy_roofline, elements, group_size, implementation
):
    device = bench_device
    if implementation == "triton" and not triton_available_for(device):
        pytest.skip("the Triton kernel needs CUDA on this device (or TRITON_INTERPRET=1 on CPU)")
    torch._dynamo.reset()  # one static compile per case, never Dynamo's recompile limit
    dequantizer = make_dequantizer(implementation)
    min_bytes = elements * 3 + elements // group_size  # int8 in, bf16 out, one scale per group
    sets = rotation_count(min_bytes, l2_cache_bytes(device)) if device.type == "cuda" else 1
    inputs = [random_mxint8(elements, group_size, device) for _ in range(sets)]

    expected = dequantize_reference(*inputs[0], group_size)
    assert same_bits(dequantizer(*inputs[0], group_size), expected), f"{implementation} is wrong"

    calls = [functools.partial(dequantizer, m, s, group_size) for m, s in inputs]
    benchmark.group = f"dequantize 2^{elements.bit_length() - 1} group {group_size} {device.type}"
    facts = time_device(benchmark, calls, device, perf_budget)
    benchmark.extra_info.update(
        facts,
        implementation=implementation,
        elements=elements,
        group_size=group_size,
        device=device.type,
        min_bytes=min_bytes,
    )
    record_rates(benchmark, nbytes=min_bytes)
    if "gbps" in benchmark.extra_info:
        copy_gbps = copy_roofline(min_bytes, device)
        benchmark.extra_info["copy_gbps"] = copy_gbps
        benchmark.extra_info["fraction_of_copy"] = benchmark.extra_info["gbps"] / copy_gbps


# mxint8: the lab's dequantize-then-F.linear; mxint8_fused: the fused kernel (CUDA; on CPU the
# interpreter under TRITON_INTERPRET=1, else the float32 reference)
LINEAR_IMPLEMENTATIONS = ["dense", "mxint8", "mxint8_fused"]
ACTIVATION_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


@pytest.mark.perfgate(
    ratios=[
        Ratio("latency relative to dense", key="implementation", reference="dense",
              higher_is_better=False)
    ]
)  # fmt: skip
@pytest.mark.parametrize("dtype_name", list(ACTIVATION_DTYPES))
@pytest.mark.parametrize("implementation", LINEAR_IMPLEMENTATIONS)
def test_linear(
    benchmark,
    bench_device,
    perf_budget,
    copy_roofline,
    weight_shape,
    batch,
    implementation,
    dtype_name,
):
    device, dtype = bench_device, ACTIVATION_DTYPES[dtype_name]
    out_features, in_features = weight_shape
    dense = nn.Linear(in_features, out_features, device=device)
    weight_bytes = dense.weight.numel() * dtype.itemsize
    sets = rotation_count(weight_bytes, l2_cache_bytes(device)) if device.type == "cuda" else 1
    layers = [make_linear(dense, implementation, dtype) for _ in range(sets)]
    x = torch.randn(batch, in_features, device=device, dtype=dtype)

    with torch.inference_mode():
        reference = nn.functional.linear(x.float(), dense.weight.float(), dense.bias.float())
        error = relative_error(layers[0](x), reference)
        assert error < 2e-2, f"{implementation} {dtype_name}: relative error {error:.2e}"
        peak = forward_peak_bytes(layers[0], x, device)
        calls = [functools.partial(layer, x) for layer in layers]
        benchmark.group = f"linear {out_features}x{in_features} batch {batch} {device.type}"
        facts = time_device(benchmark, calls, device, perf_budget)

    benchmark.extra_info.update(
        facts,
        implementation=implementation,
        dtype=dtype_name,
        weight_shape=list(weight_shape),
        batch=batch,
        device=device.type,
        relative_error_vs_fp32=error,
        storage_bytes=storage_bytes(layers[0]),
        forward_peak_bytes=peak,
    )
    record_rates(benchmark, flops=2 * batch * out_features * in_features)
    if implementation == "mxint8_fused":
        benchmark.extra_info.update(fused_bounds(dense, x, copy_roofline))
        problem = (batch, out_features, in_features, 32, dense.bias is not None)
        # the kernel the run-time choices picked: the gate compares like with like (code_path)
        benchmark.extra_info["code_path"] = (
            f"{chosen_path(*problem, device)} {tuned_config(*problem)}"
        )
        benchmark.extra_info["config_source"] = config_source(*problem)


def make_linear(dense: nn.Linear, implementation: str, dtype: torch.dtype) -> nn.Module:
    if implementation in ("mxint8", "mxint8_fused"):
        return MXINT8Linear(dense, fused=implementation == "mxint8_fused")
    copy = nn.Linear(dense.in_features, dense.out_features, device=dense.weight.device)
    copy.load_state_dict(dense.state_dict())
    return copy.to(dtype)


def fused_bounds(dense: nn.Linear, x: torch.Tensor, copy_roofline) -> dict:
    """``floor_s``: the MXINT8 weight (8 + 8/32 bits a value) read once at the measured copy
    bandwidth; ``bf16_s``: bf16 ``F.linear`` on this case's input, device time of a CUDA graph
    over rotating weights (CUDA only, None elsewhere)."""
    device = x.device
    weight_bytes = dense.weight.numel() * (1 + 1 / 32)
    facts = {"floor_s": weight_bytes / (copy_roofline(int(weight_bytes), device) * 1e9)}
    facts["bf16_s"] = None
    if device.type == "cuda":
        bf16_bytes = dense.weight.numel() * 2
        sets = rotation_count(bf16_bytes, l2_cache_bytes(device))
        weights = [dense.weight.detach().to(torch.bfloat16) for _ in range(sets)]
        x_bf16 = x.to(torch.bfloat16)
        with torch.inference_mode():
            calls = [functools.partial(nn.functional.linear, x_bf16, w) for w in weights]
            facts["bf16_s"] = graph_seconds_per_call(calls, device)
    return facts


def storage_bytes(module: nn.Module) -> int:
    tensors = [*module.parameters(), *module.buffers()]
    return sum(t.numel() * t.element_size() for t in tensors)


def forward_peak_bytes(module: nn.Module, x: torch.Tensor, device: torch.device) -> int | None:
    """Allocator peak above what was allocated before one forward (CUDA only)."""
    if device.type != "cuda":
        return None
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    before = torch.cuda.memory_allocated(device)
    module(x)
    torch.cuda.synchronize(device)
    return torch.cuda.max_memory_allocated(device) - before


ENCODER_VARIANTS = ["fp32", "bf16", "mxint8"]


@pytest.mark.perfgate(
    ratios=[Ratio("latency relative to fp32", key="variant", reference="fp32",
                  higher_is_better=False)]
)  # fmt: skip
@pytest.mark.parametrize("variant", ENCODER_VARIANTS)
@pytest.mark.slow
def test_encoder(benchmark, bench_device, perf_budget, encoder, variant):
    device = bench_device
    name, batch, sequence = encoder
    if variant == "bf16" and device.type == "cpu":
        pytest.skip("bf16 encoder runs on CUDA only (CPU bf16 matmul is not the lab's question)")
    torch.manual_seed(0)
    fp32_model = EncoderClassifier(**ENCODERS[name]).eval()
    model = build_variant(fp32_model, variant)
    tokens = torch.randint(0, ENCODERS[name]["vocab"], (batch, sequence))

    with torch.inference_mode():
        memory = encoder_memory(fp32_model, model, tokens, device)
        model, tokens = model.to(device), tokens.to(device)
        reference = fp32_model.to(device)(tokens)  # checked on the device it is timed on
        del fp32_model
        error = relative_error(model(tokens), reference)
        assert error < 5e-2, f"{variant} logits differ from fp32 by {error:.2e}"
        benchmark.group = f"encoder {name} batch {batch} seq {sequence} {device.type}"
        facts = time_wall(benchmark, lambda: model(tokens), device, perf_budget)
    benchmark.extra_info.update(
        {**facts, **memory},
        variant=variant,
        encoder=name,
        batch=batch,
        sequence=sequence,
        device=device.type,
        relative_error_vs_fp32=error,
    )


def build_variant(fp32_model: nn.Module, variant: str) -> nn.Module:
    model = copy.deepcopy(fp32_model)
    if variant == "bf16":
        return model.to(torch.bfloat16)
    if variant == "mxint8":
        return quantize_linears(model, group_size=32, skip=("classifier",))
    return model


def encoder_memory(fp32_model, model, tokens, device) -> dict:
    """Persistent bytes (parameters and buffers), the Linear share, and CUDA peaks."""
    fp32_bytes, variant_bytes = storage_bytes(fp32_model), storage_bytes(model)
    linear_fp32 = sum(
        storage_bytes(m)
        for n, m in fp32_model.named_modules()
        if isinstance(m, nn.Linear) and n != "classifier"
    )
    facts = {
        "persistent_bytes": variant_bytes,
        "fp32_persistent_bytes": fp32_bytes,
        "persistent_saved_fraction": 1 - variant_bytes / fp32_bytes,
        "theoretical_saved_fraction": THEORETICAL_SAVING,
        "quantizable_linear_share": linear_fp32 / fp32_bytes,
    }
    if device.type == "cuda":
        fp32_peak = model_peak_bytes(fp32_model, tokens, device)
        peak = model_peak_bytes(model, tokens, device)
        facts.update(
            peak_bytes=peak, fp32_peak_bytes=fp32_peak, peak_saved_fraction=1 - peak / fp32_peak
        )
    return facts


def model_peak_bytes(model: nn.Module, tokens: torch.Tensor, device: torch.device) -> int:
    """CUDA allocator peak of moving ``model`` to the device and running one forward."""
    torch.cuda.synchronize(device)
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(device)
    before = torch.cuda.memory_allocated(device)
    on_device = copy.deepcopy(model).to(device)
    on_device(tokens.to(device))
    torch.cuda.synchronize(device)
    peak = torch.cuda.max_memory_allocated(device) - before
    del on_device
    torch.cuda.empty_cache()
    return peak
