"""One warp-specialized config over K (``time``), or four launches for Nsight Compute (``ncu``).

Needs the kernel of commit bf8db46 and a Hopper GPU; from the repository root:
``python3 k_scaling.py b1 time`` or ``b512 time``; the README gives the ncu command.
"""

import sys

import torch

from kernels import mxint8 as fl
from kernels.mxint8 import quantize
from perfgate.measure.timing import graph_seconds_per_call

CASES = {
    "b1": (1, 14336, fl.LinearConfig(8, 128, 64, 1, 4, 8, kernel="ws")),
    "b512": (512, 4096, fl.LinearConfig(128, 128, 64, 1, 8, 6, kernel="ws")),
}


def main(which: str, mode: str) -> None:
    m, n, config = CASES[which]
    device = torch.device("cuda")
    for k in [512, 1024, 2048, 4096] if mode == "time" else [4096]:
        count = 4 if mode == "time" else 1
        weights = [quantize(torch.randn(n, k, device=device) * 0.02, 32) for _ in range(count)]
        x = torch.randn(m, k, device=device).to(torch.bfloat16)
        calls = [lambda w=w, x=x: fl.mxint8_linear(x, *w, None, 32, config=config) for w in weights]
        if mode == "time":
            print(which, "K", k, f"{1e6 * graph_seconds_per_call(calls, device):.1f} us")
        else:
            for _ in range(4):
                calls[0]()
            torch.cuda.synchronize()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
