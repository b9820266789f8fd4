"""Unit tests for kernels/mxint8 (format, quantizer, dequantizer, MXINT8Linear), against the
specification in docs/MXINT8.md.

Bit-exactness is checked in three layers: a table of named edge cases with bits worked out by hand
from the spec, an exhaustive sweep of all 256 x 256 (mantissa, scale) pairs against an independent
numpy model of the spec's six steps, and the Triton kernel against the PyTorch reference at zero
tolerance on random data of ragged sizes. Bits are compared as integers; any NaN matches any NaN.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from kernels import mxint8 as mx
from kernels.mxint8 import dequantize_kernel

IMPLEMENTATIONS = [
    pytest.param(mx.dequantize, id="kernel"),
    pytest.param(mx.dequantize_reference, id="reference"),
]
NAN = 0x7FC0  # stands for "some NaN" in expected bits: any NaN pattern matches it
SMALLEST_NORMAL = 2.0**-126


# --- An independent model of the spec, in numpy ------------------------------------------------
def bf16_bits_to_float32(bits: np.ndarray) -> np.ndarray:
    """float32 values of bf16 bit patterns: the 16 bits become the top half of a float32."""
    return (np.asarray(bits).astype(np.uint32) << 16).view(np.float32)


def float32_to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """Round float32 to bf16 bits, round-to-nearest-even, in integer arithmetic; NaN -> 0x7FC0."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32)
    rounded = (bits + np.uint32(0x7FFF) + ((bits >> 16) & np.uint32(1))) >> 16
    return np.where(np.isnan(x), np.uint32(NAN), rounded).astype(np.uint16)


def spec_dequantize_bits(v: np.ndarray, e: np.ndarray) -> np.ndarray:
    """bf16 bits of MXINT8 mantissas ``v`` with per-element scales ``e``: MXINT8.md's six steps."""
    v = np.asarray(v).astype(np.int32)
    e = np.asarray(e).astype(np.int32)
    sign = np.where(v < 0, 0x8000, 0)
    expo = e << 7
    a = np.abs(v)
    frac = (a & 0x3F) << 1
    out = sign | expo | frac
    bias = sign | expo
    with np.errstate(invalid="ignore"):  # inf - inf at scale 255 is meant to give NaN
        difference = bf16_bits_to_float32(out) - bf16_bits_to_float32(bias)
    y = np.where((a & 0x40) != 0, out, float32_to_bf16_bits(difference))
    return y.astype(np.uint16)


def is_bf16_nan(bits: np.ndarray) -> np.ndarray:
    return ((bits & 0x7F80) == 0x7F80) & ((bits & 0x007F) != 0)


def bf16_bits(t: torch.Tensor) -> np.ndarray:
    """Flat (row-major) uint16 bit patterns of a bfloat16 tensor on any device."""
    return t.detach().reshape(-1).cpu().view(torch.int16).numpy().view(np.uint16)


# --- The one diagnostic assertion -------------------------------------------------------------
def assert_bf16_bits_equal(
    got: torch.Tensor,
    expected: torch.Tensor | np.ndarray,
    mantissa: torch.Tensor,
    scales: torch.Tensor,
    group_size: int,
    *,
    labels: Sequence[str] | None = None,
    max_report: int = 8,
) -> None:
    """Fail unless ``got`` is bfloat16 of ``mantissa``'s shape with ``expected``'s bits.

    Any NaN matches any NaN. The report counts the differing patterns and lists the first few:
    index (or label), mantissa, scale, expected and got bits in hex.
    """
    assert got.dtype == torch.bfloat16, f"dtype {got.dtype}, expected torch.bfloat16"
    assert got.shape == mantissa.shape, f"shape {tuple(got.shape)}, expected {mantissa.shape}"
    got_bits = bf16_bits(got)
    if isinstance(expected, torch.Tensor):
        expected_bits = bf16_bits(expected)
    else:
        expected_bits = np.asarray(expected, dtype=np.uint16).reshape(-1)
    match = (got_bits == expected_bits) | (is_bf16_nan(got_bits) & is_bf16_nan(expected_bits))
    differ = np.flatnonzero(~match)
    if differ.size == 0:
        return
    v = mantissa.reshape(-1).cpu().numpy().astype(np.int64)
    e = scales.reshape(-1).cpu().numpy().astype(np.int64)
    lines = []
    for i in differ[:max_report]:
        where = f"{labels[i]} (index {i})" if labels is not None else f"index {i}"
        s = e[i // group_size]
        lines.append(
            f"  {where}: mantissa {v[i]} (0x{v[i] & 0xFF:02X}), scale {s} (0x{s:02X}), "
            f"expected 0x{expected_bits[i]:04X}, got 0x{got_bits[i]:04X}"
        )
    pytest.fail(
        f"{differ.size} of {got_bits.size} bf16 bit patterns differ "
        f"(any NaN matches any NaN); first {len(lines)}:\n" + "\n".join(lines)
    )


def random_mxint8(
    shape: tuple[int, ...], group_size: int, device: torch.device | str = "cpu"
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random mantissas (all of -128..127) and random scales (all of 0..255, specials included)."""
    numel = int(np.prod(shape))
    mantissa = torch.randint(-128, 128, shape, dtype=torch.int8, device=device)
    scales = torch.randint(0, 256, (numel // group_size,), dtype=torch.uint8, device=device)
    return mantissa, scales


# --- Layer 1: named edge cases, expected bits worked out by hand from MXINT8.md ----------------
# (name, mantissa v, scale e, expected bf16 bits)
EDGE_CASES = [
    # e = 127: y = v/64 exactly
    ("zero_e127", 0, 127, 0x0000),  # 1.0 - 1.0 = +0
    ("minus128_e127_is_plus_zero", -128, 127, 0x0000),  # -1.0 - -1.0 = +0, not -2.0
    ("plus127_e127", 127, 127, 0x3FFE),  # 127/64 = 1 + 126/128
    ("minus127_e127", -127, 127, 0xBFFE),
    ("plus64_e127_is_one", 64, 127, 0x3F80),
    ("minus64_e127_is_minus_one", -64, 127, 0xBF80),
    ("plus1_e127_is_1/64", 1, 127, 0x3C80),  # 2^-6: exponent 121
    ("minus1_e127", -1, 127, 0xBC80),
    ("plus32_e127_is_half", 32, 127, 0x3F00),  # 1.5 - 1.0
    ("plus63_e127", 63, 127, 0x3F7C),  # 63/64 = 2^-1 * (1 + 124/128)
    ("plus96_e127_is_1.5", 96, 127, 0x3FC0),
    ("minus32_e128_is_minus_one", -32, 128, 0xBF80),  # -3.0 - -2.0
    ("plus1_e126", 1, 126, 0x3C00),  # 2^-7
    # e = 0: bf16 subnormals, (frac/128) * 2^-126 whether or not the integer bit is set
    ("zero_e0", 0, 0, 0x0000),
    ("minus128_e0_is_plus_zero", -128, 0, 0x0000),  # -0 - -0 = +0
    ("plus64_e0_integer_bit_set_is_zero", 64, 0, 0x0000),
    ("minus64_e0_integer_bit_set_is_minus_zero", -64, 0, 0x8000),
    ("plus127_e0_integer_bit_set", 127, 0, 0x007E),
    ("minus127_e0_integer_bit_set", -127, 0, 0x807E),
    ("plus63_e0_integer_bit_clear", 63, 0, 0x007E),
    ("plus1_e0_integer_bit_clear", 1, 0, 0x0002),  # 2^-132
    ("minus1_e0_integer_bit_clear", -1, 0, 0x8002),
    # e = 1..7: y = v/64 * 2^(e-127) comes out subnormal for small |v|
    ("plus1_e1_subnormal", 1, 1, 0x0002),  # 2^-132
    ("minus1_e1_subnormal", -1, 1, 0x8002),
    ("plus32_e1_subnormal", 32, 1, 0x0040),  # 2^-127
    ("plus63_e1_subnormal", 63, 1, 0x007E),  # 63 * 2^-132 = 126 * 2^-133
    ("plus64_e1_smallest_normal", 64, 1, 0x0080),
    ("plus127_e1", 127, 1, 0x00FE),
    ("plus1_e6_subnormal", 1, 6, 0x0040),  # 2^-127
    ("plus1_e7_smallest_normal", 1, 7, 0x0080),  # 2^-126
    # e = 254: the largest finite scale
    ("plus127_e254", 127, 254, 0x7F7E),
    ("minus127_e254", -127, 254, 0xFF7E),
    ("plus64_e254", 64, 254, 0x7F00),  # 2^127
    ("plus1_e254", 1, 254, 0x7C00),  # 2^121
    ("zero_e254", 0, 254, 0x0000),
    ("minus128_e254_is_plus_zero", -128, 254, 0x0000),
    # e = 255: +-inf for v = +-64, NaN for everything else
    ("plus64_e255_is_plus_inf", 64, 255, 0x7F80),
    ("minus64_e255_is_minus_inf", -64, 255, 0xFF80),
    ("zero_e255_is_nan", 0, 255, NAN),  # inf - inf
    ("minus128_e255_is_nan", -128, 255, NAN),
    ("plus1_e255_is_nan", 1, 255, NAN),
    ("plus65_e255_is_nan", 65, 255, NAN),
    ("plus127_e255_is_nan", 127, 255, NAN),
    ("minus127_e255_is_nan", -127, 255, NAN),
]
EDGE_NAMES = [name for name, _, _, _ in EDGE_CASES]


def edge_case_inputs(device: torch.device | str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    mantissa = torch.tensor([v for _, v, _, _ in EDGE_CASES], dtype=torch.int8, device=device)
    scales = torch.tensor([e for _, _, e, _ in EDGE_CASES], dtype=torch.uint8, device=device)
    return mantissa, scales


def assert_edge_cases(got: torch.Tensor, mantissa: torch.Tensor, scales: torch.Tensor) -> None:
    expected = [bits for _, _, _, bits in EDGE_CASES]
    assert_bf16_bits_equal(
        got, expected, mantissa, scales, 1, labels=EDGE_NAMES, max_report=len(EDGE_CASES)
    )


def test_spec_model_matches_hand_computed_edge_cases():
    mantissa, scales = edge_case_inputs()
    model_bits = spec_dequantize_bits(mantissa.numpy(), scales.numpy()).astype(np.int16)
    assert_edge_cases(torch.from_numpy(model_bits).view(torch.bfloat16), mantissa, scales)


@pytest.mark.parametrize("dequantize_fn", IMPLEMENTATIONS)
def test_edge_cases_match_hand_computed_bits(dequantize_fn, device):
    mantissa, scales = edge_case_inputs(device)
    assert_edge_cases(dequantize_fn(mantissa, scales, group_size=1), mantissa, scales)


# --- Layer 2: all 65,536 (mantissa, scale) pairs -----------------------------------------------
@pytest.fixture(scope="module")
def all_pairs() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Element i holds mantissa (i % 256) - 128 and scale i // 256, with the model's bits."""
    v = np.tile(np.arange(-128, 128), 256).astype(np.int8)
    e = np.repeat(np.arange(256), 256).astype(np.uint8)
    return v, e, spec_dequantize_bits(v, e)


@pytest.mark.parametrize("dequantize_fn", IMPLEMENTATIONS)
@pytest.mark.parametrize(
    "group_size",
    [
        pytest.param(1, id="one_scale_per_element"),
        pytest.param(256, id="one_scale_per_group_of_256"),  # each group is -128..127
    ],
)
def test_all_65536_pairs_match_spec_model(dequantize_fn, group_size, device, all_pairs):
    v, e, expected = all_pairs
    mantissa = torch.from_numpy(v).to(device)
    scales = torch.from_numpy(e[::group_size].copy()).to(device)
    got = dequantize_fn(mantissa, scales, group_size)
    assert_bf16_bits_equal(got, expected, mantissa, scales, group_size)


# The words kernel (power-of-two groups of >= 4): a block whose scales all lie in 7..252 takes its
# few-instruction path, any other block the six steps. Both, on every pair.
@pytest.mark.parametrize("group_size", [4, 32, 256])
@pytest.mark.parametrize("block_size, num_warps", [(2048, 4), (32768, 16)])
@pytest.mark.parametrize(
    "low, high", [(7, 252), (0, 255)], ids=["scales_7_to_252_usual_path", "all_scales"]
)
def test_words_kernel_matches_spec_model_on_every_pair(
    group_size, block_size, num_warps, low, high, device
):
    if not mx.triton_available_for(torch.device(device)):
        pytest.skip("Triton runs on CPU tensors only under TRITON_INTERPRET=1")
    v = np.tile(np.arange(-128, 128), high - low + 1).astype(np.int8)
    e = np.repeat(np.arange(low, high + 1), 256).astype(np.uint8)
    mantissa = torch.from_numpy(v).to(device)
    scales = torch.from_numpy(e[::group_size].copy()).to(device)
    out = torch.empty(mantissa.shape, dtype=torch.bfloat16, device=device)
    dequantize_kernel.launch_dequantize_words(
        mantissa, scales, out, group_size, block_size, num_warps
    )
    assert_bf16_bits_equal(out, spec_dequantize_bits(v, e), mantissa, scales, group_size)


@pytest.mark.parametrize(
    "group_size, offset, fits",
    [
        (32, 0, True),
        (4, 0, True),
        (2, 0, False),
        (96, 0, False),
        (32, 1, False),  # a mantissa that does not start on an int32 word
    ],
)
def test_words_kernel_fits_power_of_two_groups_of_whole_words(group_size, offset, fits):
    mantissa = torch.zeros(offset + 384, dtype=torch.int8)[offset:]
    assert dequantize_kernel.words_fit(mantissa, group_size) is fits


def test_cpu_dequantize_keeps_the_six_step_kernel(monkeypatch):
    """Under the interpreter the CPU suite counts dequantize's instructions: its kernel stays."""
    if not mx.triton_available_for(torch.device("cpu")):
        pytest.skip("Triton runs on CPU tensors only under TRITON_INTERPRET=1")
    ran = []
    monkeypatch.setattr(
        dequantize_kernel, "launch_dequantize_words", lambda *a: ran.append("words")
    )
    monkeypatch.setattr(dequantize_kernel, "launch_dequantize", lambda *a: ran.append("six_steps"))
    mantissa, scales = torch.zeros(384, dtype=torch.int8), torch.full((12,), 127, dtype=torch.uint8)
    mx.dequantize(mantissa, scales, 32)
    assert ran == ["six_steps"]


@pytest.mark.gpu
def test_cuda_dequantize_runs_the_words_kernel_where_it_fits(monkeypatch):
    ran = []
    monkeypatch.setattr(
        dequantize_kernel, "launch_dequantize_words", lambda *a: ran.append("words")
    )
    monkeypatch.setattr(dequantize_kernel, "launch_dequantize", lambda *a: ran.append("six_steps"))
    mantissa = torch.zeros(385, dtype=torch.int8, device="cuda")
    scales = torch.full((12,), 127, dtype=torch.uint8, device="cuda")
    mx.dequantize(mantissa[:384], scales, 32)
    mx.dequantize(mantissa[1:], scales, 32)  # not on a word: the six steps
    assert ran == ["words", "six_steps"]


# --- Layer 3: kernel vs reference on random data, zero tolerance ------------------------------
RAGGED_CASES = [  # (mantissa shape, group_size): numel never a multiple of the 2048-element block
    ((1,), 1),
    ((7, 32), 32),
    ((1000, 8), 8),
    ((3 * 1024 + 96,), 16),
    ((5, 3, 64), 64),
    ((3, 11, 128), 128),
    ((2304,), 256),
    ((3, 1536), 512),
    ((10, 48), 32),  # groups straddle rows
    ((3 * 1024 + 96,), 96),  # groups straddle the kernel's blocks
]


@pytest.mark.parametrize(
    "shape, group_size", RAGGED_CASES, ids=[f"{s}-g{g}" for s, g in RAGGED_CASES]
)
def test_kernel_matches_reference_on_random_data(shape, group_size, device):
    mantissa, scales = random_mxint8(shape, group_size, device)
    expected = mx.dequantize_reference(mantissa, scales, group_size)
    got = mx.dequantize(mantissa, scales, group_size)
    assert_bf16_bits_equal(got, expected, mantissa, scales, group_size)


@pytest.mark.skipif(
    torch.cuda.is_available(), reason="with CUDA present, CPU tensors use the reference by design"
)
def test_cpu_dequantize_runs_the_triton_kernel_not_the_reference(monkeypatch):
    def no_fallback(*args, **kwargs):
        raise AssertionError("dequantize fell back to dequantize_reference on CPU")

    monkeypatch.setattr(dequantize_kernel, "dequantize_reference", no_fallback)
    mantissa, scales = random_mxint8((256,), 32)
    expected = spec_dequantize_bits(mantissa.numpy(), np.repeat(scales.numpy(), 32))
    assert_bf16_bits_equal(mx.dequantize(mantissa, scales, 32), expected, mantissa, scales, 32)


@pytest.mark.parametrize("dequantize_fn", IMPLEMENTATIONS)
def test_groups_are_consecutive_elements_in_row_major_order(dequantize_fn, device):
    mantissa, scales = random_mxint8((10, 48), 32, device)  # 15 groups, most straddle two rows
    per_element_scale = np.repeat(scales.cpu().numpy(), 32)
    expected = spec_dequantize_bits(mantissa.cpu().numpy().reshape(-1), per_element_scale)
    assert_bf16_bits_equal(dequantize_fn(mantissa, scales, 32), expected, mantissa, scales, 32)


NON_CONTIGUOUS_VIEWS = {
    "transposed": lambda m: m.t(),
    "column_slice": lambda m: m[:, 16:80],
    "every_other_row": lambda m: m[::2],
}


@pytest.mark.parametrize("dequantize_fn", IMPLEMENTATIONS)
@pytest.mark.parametrize("view", NON_CONTIGUOUS_VIEWS.values(), ids=NON_CONTIGUOUS_VIEWS.keys())
def test_non_contiguous_mantissa_equals_its_contiguous_copy(dequantize_fn, view, device):
    mantissa = view(torch.randint(-128, 128, (64, 96), dtype=torch.int8, device=device))
    assert not mantissa.is_contiguous()
    scales = torch.randint(0, 256, (mantissa.numel() // 32,), dtype=torch.uint8, device=device)
    expected = dequantize_fn(mantissa.contiguous(), scales, 32)
    assert_bf16_bits_equal(dequantize_fn(mantissa, scales, 32), expected, mantissa, scales, 32)


@pytest.mark.parametrize("dequantize_fn", IMPLEMENTATIONS)
def test_non_contiguous_scales_equal_their_contiguous_copy(dequantize_fn, device):
    mantissa, _ = random_mxint8((4, 256), 32, device)
    scales = torch.randint(0, 256, (64,), dtype=torch.uint8, device=device)[::2]
    assert not scales.is_contiguous()
    expected = dequantize_fn(mantissa, scales.contiguous(), 32)
    assert_bf16_bits_equal(dequantize_fn(mantissa, scales, 32), expected, mantissa, scales, 32)


@pytest.mark.parametrize("dequantize_fn", IMPLEMENTATIONS)
@pytest.mark.parametrize("shape", [(0,), (0, 32), (4, 0), (2, 0, 64)])
def test_empty_mantissa_gives_empty_bfloat16(dequantize_fn, shape, device):
    mantissa = torch.empty(shape, dtype=torch.int8, device=device)
    scales = torch.empty(0, dtype=torch.uint8, device=device)
    out = dequantize_fn(mantissa, scales, 32)
    assert (out.shape, out.dtype, out.device.type) == (shape, torch.bfloat16, device.type)


# --- Quantizer --------------------------------------------------------------------------------
EMPTY_QUANTIZE_SHAPES = [((0,), (0,)), ((0, 32), (0, 1)), ((3, 0), (3, 0)), ((2, 0, 64), (2, 0, 2))]


@pytest.mark.parametrize("shape, scales_shape", EMPTY_QUANTIZE_SHAPES)
def test_quantize_empty_gives_empty_results_of_the_right_shapes(shape, scales_shape):
    mantissa, scales = mx.quantize(torch.empty(shape), 32)
    assert (mantissa.shape, mantissa.dtype) == (shape, torch.int8)
    assert (scales.shape, scales.dtype) == (scales_shape, torch.uint8)


def weight_with_special_groups(shape: tuple[int, ...], magnitude: float, dtype: torch.dtype):
    """Normally distributed data with, in the first row, an all-zero group, two values below
    2^-126 in an otherwise ordinary group, and a group made only of values below 2^-126."""
    w = torch.randn(shape) * magnitude
    groups = w.view(-1, 32)
    groups[1] = 0.0
    groups[2, 5], groups[2, 6] = 1e-39, -3e-39
    groups[3] = 1e-39 * torch.randn(32).sign()
    return w.to(dtype)


def bf16_rounded(w: torch.Tensor) -> np.ndarray:
    """w rounded to bf16 (round-to-nearest-even, done in numpy), flat, as float64."""
    return bf16_bits_to_float32(float32_to_bf16_bits(w.float().numpy().reshape(-1))).astype(float)


QUANTIZE_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


@pytest.mark.parametrize("dtype", QUANTIZE_DTYPES.values(), ids=QUANTIZE_DTYPES.keys())
@pytest.mark.parametrize("shape", [(256,), (6, 128)], ids=["1d", "2d"])
@pytest.mark.parametrize("magnitude", [1e-3, 1.0, 1e3])
def test_quantize_scales_mantissas_and_round_trip_bound(dtype, shape, magnitude):
    group_size = 32
    w = weight_with_special_groups(shape, magnitude, dtype)
    mantissa, scales = mx.quantize(w, group_size)
    assert (mantissa.shape, mantissa.dtype) == (w.shape, torch.int8)
    assert scales.shape == (*shape[:-1], shape[-1] // group_size)
    assert scales.dtype == torch.uint8

    rounded = bf16_rounded(w)
    flushed = (rounded != 0) & (np.abs(rounded) < SMALLEST_NORMAL)
    assert flushed.any() or dtype == torch.float16  # fp16 cannot hold values below 2^-126
    x = np.where(flushed, 0.0, rounded).reshape(-1, group_size)
    m = mantissa.numpy().astype(np.int64).reshape(-1, group_size)
    s = scales.numpy().astype(np.int64).reshape(-1)
    assert (m != -128).all(), "quantize wrote -128"
    zero = (x == 0).all(axis=1)
    assert zero[1] and not zero.all()
    assert (s[zero] == 0).all() and (m[zero] == 0).all(), "an all-zero group got nonzero codes"
    largest = np.abs(m[~zero]).max(axis=1)
    assert ((largest >= 64) & (largest <= 127)).all(), f"group maxima {largest}"
    exponent = np.frexp(np.abs(x[~zero]).max(axis=1))[1]  # max = f * 2^k with f in [0.5, 1)
    np.testing.assert_array_equal(s[~zero], exponent - 1 + 127, err_msg="scales")

    got = mx.dequantize(mantissa, scales, group_size).double().numpy().reshape(-1, group_size)
    error = np.abs(got - x)
    bound = 2.0 ** (s[:, None] - 127) / 128
    worst = np.unravel_index(np.argmax(error - bound), error.shape)
    assert (error <= bound).all(), (
        f"round trip error {error[worst]:.3g} > bound {bound[worst]:.3g} at group {worst[0]}, "
        f"element {worst[1]}: bf16(w)={x[worst]!r}, mantissa {m[worst]}, scale {s[worst[0]]}"
    )
    assert (got.reshape(-1)[flushed] == 0).all(), "values below 2^-126 were not flushed to 0"


# (name, w, group_size, expected mantissas, expected scales, fp16 can represent w)
HAND_QUANTIZATIONS = [
    ("powers_of_two", [1.0, -0.5, 0.25, 0.0, 2**-6, -1.5, 0.75, 127 / 64], 8,
     [64, -32, 16, 0, 1, -96, 48, 127], [127], True),
    ("ties_round_half_to_even", [1.0, 2**-7, 3 * 2**-7, 5 * 2**-7], 4,
     [64, 0, 2, 2], [127], True),  # 0.5 -> 0, 1.5 -> 2, 2.5 -> 2
    ("largest_rounds_to_128_clamps_to_127", [1.9921875, -1.9921875, 1.0, 0.0], 4,
     [127, -127, 64, 0], [127], True),  # 1.9921875 * 64 = 127.5
    ("small_group", [2**-10, -3 * 2**-12, 0.0, 0.0], 4, [64, -48, 0, 0], [117], True),
    ("two_groups_per_row", [[8.0, 1.0, -3.0, 0.5], [0.0, 0.0, 0.0, 0.0]], 2,
     [[64, 8, -96, 16], [0, 0, 0, 0]], [[130, 128], [0, 0]], True),
    ("rounds_to_bf16_before_scaling", [1 + 2**-7 + 2**-12, 0.0, 0.0, 0.0], 4,
     [64, 0, 0, 0], [127], True),  # bf16 gives 1 + 2^-7 -> 64.5 -> 64, not 65
    ("smallest_normal_kept_below_flushed", [2**-126, 1e-39, -(2**-126), 0.0], 4,
     [64, 0, -64, 0], [1], False),
    ("only_values_below_2^-126_flush_to_zero", [1e-39, -1e-39, 5e-40, 0.0], 4,
     [0, 0, 0, 0], [0], False),
    ("largest_finite_scale", [1.5 * 2**127, -(2**126), 0.0, 0.0], 4,
     [96, -32, 0, 0], [254], False),
]  # fmt: skip
HAND_CASES = [
    pytest.param(w, g, m, s, dtype, id=f"{name}-{str(dtype)[6:]}")
    for name, w, g, m, s, fp16_ok in HAND_QUANTIZATIONS
    for dtype in QUANTIZE_DTYPES.values()
    if fp16_ok or dtype != torch.float16
]


@pytest.mark.parametrize("w, group_size, expected_mantissa, expected_scales, dtype", HAND_CASES)
def test_quantize_matches_hand_computed_codes(
    w, group_size, expected_mantissa, expected_scales, dtype
):
    mantissa, scales = mx.quantize(torch.tensor(w, dtype=dtype), group_size)
    assert mantissa.tolist() == expected_mantissa
    assert scales.tolist() == expected_scales


def test_quantize_non_contiguous_input_equals_its_contiguous_copy():
    w = torch.randn(64, 96).t()
    mantissa, scales = mx.quantize(w, 32)
    expected_mantissa, expected_scales = mx.quantize(w.contiguous(), 32)
    assert torch.equal(mantissa, expected_mantissa) and torch.equal(scales, expected_scales)


@pytest.mark.parametrize("value", [3.4e38, torch.finfo(torch.float32).max], ids=["3.4e38", "max"])
@pytest.mark.parametrize("sign", [1.0, -1.0], ids=["plus", "minus"])
def test_quantize_saturates_float32_beyond_bf16_range(value, sign):
    # float32 finite, but rounding to bf16 would give inf: the group saturates, never NaN
    w = torch.tensor([sign * value, 1.0, -(2.0**122), 0.0])
    mantissa, scales = mx.quantize(w, 4)
    assert mantissa.tolist() == [sign * 127, 0, -2, 0] and scales.tolist() == [254]
    got = mx.dequantize(mantissa, scales, 4).float()
    assert got.tolist() == [sign * 127 / 64 * 2.0**127, 0.0, -(2.0**122), 0.0]


# --- MXINT8Linear -----------------------------------------------------------------------------
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
@pytest.mark.parametrize(
    "dtype, max_relative_error",
    [pytest.param(torch.float32, 1e-2, id="fp32"), pytest.param(torch.bfloat16, 1e-2, id="bf16")],
)
def test_linear_output_close_to_nn_linear(bias, dtype, max_relative_error):
    linear = nn.Linear(64, 40, bias=bias)  # 40 outputs: the bias is padded to 2 groups of 32
    x = torch.randn(5, 64).to(dtype)
    y = mx.MXINT8Linear(linear, group_size=32)(x)
    assert (y.shape, y.dtype) == ((5, 40), dtype)
    with torch.no_grad():
        expected = linear(x.float())
    assert mx.relative_error(y, expected) < max_relative_error


@pytest.mark.parametrize("bias, expected_bytes", [(True, 2560 + 80 + 64 + 2), (False, 2560 + 80)])
def test_linear_storage_bytes_counts_mantissas_and_scales(bias, expected_bytes):
    # weight 40 x 64: 2560 mantissa bytes + 80 scales; bias 40 padded to 64: 64 bytes + 2 scales
    layer = mx.MXINT8Linear(nn.Linear(64, 40, bias=bias), group_size=32)
    assert layer.storage_bytes == expected_bytes


@pytest.mark.parametrize("group_size, expected_bits", [(32, 8.25), (128, 8.0625)])
def test_linear_bits_per_weight(group_size, expected_bits):
    layer = mx.MXINT8Linear(nn.Linear(256, 8), group_size=group_size)
    assert layer.bits_per_weight == expected_bits


def test_linear_moves_with_to_device(device):
    layer = mx.MXINT8Linear(nn.Linear(64, 40), group_size=32).to(device)
    assert {buffer.device.type for buffer in layer.buffers()} == {device.type}
    y = layer(torch.randn(3, 64, device=device))
    assert (y.shape, y.device.type) == ((3, 40), device.type)


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
def test_linear_state_dict_holds_int8_and_uint8_buffers(bias):
    layer = mx.MXINT8Linear(nn.Linear(64, 40, bias=bias), group_size=32)
    state = layer.state_dict()
    expected = {"weight_mantissa": torch.int8, "weight_scales": torch.uint8}
    if bias:
        expected |= {"bias_mantissa": torch.int8, "bias_scales": torch.uint8}
    assert {name: t.dtype for name, t in state.items()} == expected

    other = mx.MXINT8Linear(nn.Linear(64, 40, bias=bias), group_size=32)
    other.load_state_dict(state)
    x = torch.randn(3, 64)
    assert torch.equal(other(x), layer(x))


# --- Rejections: each names the offending argument --------------------------------------------
def _valid(numel: int = 64, group_size: int = 32) -> tuple[torch.Tensor, torch.Tensor]:
    return random_mxint8((numel,), group_size)


DEQUANTIZE_REJECTIONS = {  # name: (arguments, exception, pattern the message must contain)
    "mantissa_uint8": (lambda: (_valid()[0].view(torch.uint8), _valid()[1], 32), TypeError,
                       "mantissa"),
    "mantissa_int32": (lambda: (_valid()[0].int(), _valid()[1], 32), TypeError, "mantissa"),
    "scales_int8": (lambda: (_valid()[0], _valid()[1].view(torch.int8), 32), TypeError, "scales"),
    "scales_int32": (lambda: (_valid()[0], _valid()[1].int(), 32), TypeError, "scales"),
    "group_size_0": (lambda: (*_valid(), 0), ValueError, "group_size"),
    "group_size_minus_1": (lambda: (*_valid(), -1), ValueError, "group_size"),
    "group_size_float": (lambda: (*_valid(), 32.0), TypeError, "group_size"),
    "numel_not_divisible": (lambda: (_valid(100, 1)[0], _valid(96)[1], 32), ValueError,
                            "group_size"),
    "too_few_scales": (lambda: (_valid()[0], _valid(32)[1], 32), ValueError, "scales"),
    "too_many_scales": (lambda: (_valid()[0], _valid(96)[1], 32), ValueError, "scales"),
}  # fmt: skip


@pytest.mark.parametrize("dequantize_fn", IMPLEMENTATIONS)
@pytest.mark.parametrize(
    "arguments, error, pattern", DEQUANTIZE_REJECTIONS.values(), ids=DEQUANTIZE_REJECTIONS.keys()
)
def test_dequantize_rejects_bad_input(dequantize_fn, arguments, error, pattern):
    with pytest.raises(error, match=pattern):
        dequantize_fn(*arguments())


@pytest.mark.gpu
@pytest.mark.parametrize("dequantize_fn", IMPLEMENTATIONS)
def test_dequantize_rejects_mantissa_and_scales_on_different_devices(dequantize_fn):
    mantissa, scales = _valid()
    with pytest.raises(ValueError, match="device"):
        dequantize_fn(mantissa.cuda(), scales, 32)
    with pytest.raises(ValueError, match="device"):
        dequantize_fn(mantissa, scales.cuda(), 32)


QUANTIZE_REJECTIONS = {  # name: (w, group_size, exception)
    "inf": (torch.tensor([1.0, float("inf"), 0.0, 0.0]), 4, ValueError),
    "minus_inf_bf16": (torch.tensor([1.0, -float("inf"), 0.0, 0.0], dtype=torch.bfloat16), 4,
                       ValueError),
    "nan": (torch.tensor([1.0, 0.0, float("nan"), 0.0]), 4, ValueError),
    "nan_fp16": (torch.tensor([float("nan"), 0.0, 0.0, 0.0], dtype=torch.float16), 4, ValueError),
    "int_tensor": (torch.arange(8, dtype=torch.int32), 4, TypeError),
    "int8_tensor": (torch.arange(8, dtype=torch.int8), 4, TypeError),
    "last_dim_not_divisible": (torch.randn(4, 30), 32, ValueError),
    "zero_dim": (torch.tensor(1.0), 1, ValueError),
}  # fmt: skip


@pytest.mark.parametrize(
    "w, group_size, error", QUANTIZE_REJECTIONS.values(), ids=QUANTIZE_REJECTIONS.keys()
)
def test_quantize_rejects_bad_input(w, group_size, error):
    with pytest.raises(error, match=r"\bw\b"):
        mx.quantize(w, group_size)


@pytest.mark.parametrize(
    "group_size, error", [(0, ValueError), (-1, ValueError), (32.0, TypeError)]
)
def test_quantize_rejects_bad_group_size(group_size, error):
    with pytest.raises(error, match="group_size"):
        mx.quantize(torch.randn(4, 64), group_size)


@pytest.mark.parametrize("not_linear", [nn.Conv1d(4, 4, 1), nn.Identity()], ids=["conv", "id"])
def test_linear_rejects_a_module_that_is_not_nn_linear(not_linear):
    with pytest.raises(TypeError, match="linear"):
        mx.MXINT8Linear(not_linear)


@pytest.mark.parametrize("fused", [None, True, False], ids=["auto", "fused", "unfused"])
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8, torch.bool])
def test_linear_rejects_non_floating_input_naming_its_dtype(dtype, fused):
    layer = mx.MXINT8Linear(nn.Linear(64, 8), group_size=32, fused=fused)
    with pytest.raises(ValueError, match=f"floating-point input, got a {dtype} tensor"):
        layer(torch.ones(2, 64, dtype=dtype))


# --- GPU only: sizes the interpreter cannot reach ---------------------------------------------
def _require_free_cuda_memory(gib: float) -> None:
    free, _ = torch.cuda.mem_get_info()
    if free < gib * 2**30:
        pytest.skip(f"needs {gib} GiB of free GPU memory, {free / 2**30:.1f} GiB free")


@pytest.mark.gpu
def test_kernel_indexes_past_2_31_elements():
    group_size, n = 32, 2**31 + 4096
    _require_free_cuda_memory(7)  # 2 GiB mantissas + 64 MiB scales + 4 GiB output
    mantissa = torch.zeros(n, dtype=torch.int8, device="cuda")
    random_from = n - 4 * 2**20  # the last 4 MiB hold random mantissas
    mantissa[random_from:] = torch.randint(-128, 128, (n - random_from,), dtype=torch.int8,
                                           device="cuda")  # fmt: skip
    scales = torch.randint(0, 256, (n // group_size,), dtype=torch.uint8, device="cuda")
    got = mx.dequantize(mantissa, scales, group_size)

    start = n - 2**20  # group-aligned, and below 2^31: the compared tail crosses element 2^31
    tail_mantissa, tail_scales = mantissa[start:], scales[start // group_size :]
    expected = mx.dequantize_reference(tail_mantissa, tail_scales, group_size)
    assert_bf16_bits_equal(got[start:], expected, tail_mantissa, tail_scales, group_size)


@pytest.mark.gpu
def test_kernel_matches_reference_on_2_24_random_elements():
    mantissa, scales = random_mxint8((2**24,), 32, "cuda")
    expected = mx.dequantize_reference(mantissa, scales, 32)
    assert_bf16_bits_equal(mx.dequantize(mantissa, scales, 32), expected, mantissa, scales, 32)


# --- The package reads one way ------------------------------------------------------------------
PACKAGE_ORDER = [  # kernels/mxint8/__init__.py lists them so: each imports only from earlier ones
    "format", "reference", "quantizer", "dequantize_kernel", "linear_tile", "linear_words",
    "linear_kernel", "linear_gemv", "linear_gemv_stream", "linear_mma", "linear_launch",
    "linear_sweep",
    "tuning", "linear", "module",
]  # fmt: skip


def test_package_modules_import_only_from_the_ones_before_them():
    folder = Path(mx.__file__).parent
    assert {p.stem for p in folder.glob("*.py")} == {*PACKAGE_ORDER, "__init__"}
    for position, name in enumerate(PACKAGE_ORDER):
        source = (folder / f"{name}.py").read_text()
        imported = re.findall(r"^from kernels\.mxint8\.(\w+) import", source, re.MULTILINE)
        later = [m for m in imported if PACKAGE_ORDER.index(m) >= position]
        assert not later, f"kernels/mxint8/{name}.py imports {later}, which come after it"
        assert len(source.splitlines()) <= 300, f"kernels/mxint8/{name}.py is over 300 lines"
