"""Python runs this at the start of every process of the test suite, its pytest and perfgate
children included (tests/conftest.py puts this folder on PYTHONPATH): where
PERFGATE_TEST_CPU_INFO names a file, py-cpuinfo's description of the CPU is read from it instead
of being measured again. py-cpuinfo starts a Python process of its own for it, 0.4 s each time,
and the suite's children asked for it about 380 times a run; conftest.py measures it once."""

import json
import os

_path = os.environ.get("PERFGATE_TEST_CPU_INFO")
if _path and os.path.exists(_path):
    try:
        import cpuinfo
    except ImportError:  # a virtual environment of a test without py-cpuinfo
        pass
    else:
        with open(_path, encoding="utf-8") as _file:
            _info = json.load(_file)
        cpuinfo.get_cpu_info = lambda: dict(_info)
