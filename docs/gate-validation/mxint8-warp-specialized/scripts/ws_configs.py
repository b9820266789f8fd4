"""Time single warp-specialized configs against bf16 F.linear (CUDA-graph device time).

Needs the kernel of commit bf8db46 (kernels/mxint8/linear_ws.py) and a Hopper GPU; run from the
repository root with PYTHONPATH=$PWD.
"""

import torch
import torch.nn.functional as F

from kernels import mxint8 as fl
from kernels.mxint8 import quantize
from perfgate.measure.timing import graph_seconds_per_call

C = fl.LinearConfig
CASES = [
    (1, 14336, C(8, 128, 64, 1, 4, 8, kernel="ws")),
    (1, 14336, C(8, 128, 128, 1, 4, 6, kernel="ws")),
    (1, 14336, C(8, 128, 256, 1, 4, 4, kernel="ws")),
    (1, 4096, C(8, 128, 128, 4, 4, 6, kernel="ws")),
    (16, 4096, C(16, 128, 128, 4, 4, 6, kernel="ws")),
    (16, 14336, C(16, 128, 128, 1, 4, 6, kernel="ws")),
    (512, 4096, C(128, 128, 128, 1, 8, 3, kernel="ws_plain")),
    (512, 14336, C(128, 128, 128, 1, 8, 3, kernel="ws_plain")),
]


def main() -> None:
    device = torch.device("cuda")
    for m, n, config in CASES:
        weights = [quantize(torch.randn(n, 4096, device=device) * 0.02, 32) for _ in range(4)]
        x = torch.randn(m, 4096, device=device).to(torch.bfloat16)
        expected = fl.mxint8_linear_reference(x, *weights[0], None, 32)
        got = fl.mxint8_linear(x, *weights[0], None, 32, config=config)
        error = fl.relative_error(got, expected)
        calls = [
            lambda w=w, x=x, c=config: fl.mxint8_linear(x, *w, None, 32, config=c) for w in weights
        ]
        fused = 1e6 * graph_seconds_per_call(calls, device)
        dense = [torch.randn(n, 4096, device=device).to(torch.bfloat16) for _ in range(3)]
        bf16 = 1e6 * graph_seconds_per_call(
            [lambda w=w, x=x: F.linear(x, w) for w in dense], device
        )
        print(f"m={m} n={n} {config}: {fused:.1f} us, bf16 {bf16:.1f} us, error {error:.2e}")


if __name__ == "__main__":
    main()
