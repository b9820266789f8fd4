"""A neighbour that competes for memory bandwidth, as another job's data processing does: streams
two 256 MB arrays forever (session 13: s13.sh runs it beside a series of sessions)."""

import numpy as np

a = np.ones(2**25)
b = np.empty_like(a)
while True:
    np.copyto(b, a)
    np.add(a, 1.0, out=a)
