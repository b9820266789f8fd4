"""Measure: time, count and profile one benchmark case; nothing here judges."""

# A case is host-bound when the host's enqueue time per call is above this share of its device
# time: the host, not the GPU, then sets the pace (measure.timing marks it; the verdict names it).
HOST_BOUND_FRACTION = 0.8
PROFILE_ROWS = 15  # parts a stored profile keeps of each kind (kernels, allocation sites)
