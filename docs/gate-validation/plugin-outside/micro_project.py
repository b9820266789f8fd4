"""Write a project of 12 pure-Python micro-benchmarks (pytest-benchmark's default calibration:
~100k-200k rounds each) into a folder: the "cost when asked" case of issue 21.

    python micro_project.py DIR [--virtual]

--virtual: the same 12 tests timed on a virtual clock that each call advances by 1 us (+-5 %,
seeded; each reading by 1 ns), through pytest-benchmark's --benchmark-timer: the rounds are the
same in every run, so the gate never re-runs a case that the loaded machine slowed, and what the
gate adds is perfgate's own work (loading, judging, saving), not the machine's noise.
"""

import sys
from pathlib import Path

CASES = {
    "sum_list": "sum, [1, 2, 3]",
    "max_list": "max, [3, 1, 2]",
    "sorted_small": "sorted, [3, 1, 2]",
    "len_str": "len, 'perfgate'",
    "str_upper": "str.upper, 'perfgate'",
    "str_join": "'-'.join, ['a', 'b', 'c']",
    "dict_get": "{'a': 1}.get, 'a'",
    "int_parse": "int, '12345'",
    "tuple_make": "tuple, [1, 2, 3]",
    "abs_int": "abs, -5",
    "divmod_int": "divmod, 17, 5",
    "round_float": "round, 3.14159, 2",
}


VIRTUAL_CLOCK = """
import random

now = 0.0
noise = random.Random(0)

def clock():  # each reading takes 1 ns, so pytest-benchmark can measure its precision
    global now
    now += 1e-9
    return now

def call(function, *arguments):
    global now
    function(*arguments)
    now += 1e-6 * (0.95 + 0.1 * noise.random())
"""


def write(folder: Path, virtual: bool) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    call = "call, " if virtual else ""
    lines = [
        f"def test_{name}(benchmark):\n    benchmark({call}{args})\n"
        for name, args in CASES.items()
    ]
    head = "from virtual_clock import call\n\n\n" if virtual else ""
    (folder / "test_micro.py").write_text(head + "\n\n".join(lines))
    ini = "[pytest]\n" + ("addopts = --benchmark-timer=virtual_clock.clock\n" if virtual else "")
    (folder / "pytest.ini").write_text(ini)
    if virtual:
        (folder / "virtual_clock.py").write_text(VIRTUAL_CLOCK)


if __name__ == "__main__":
    write(Path(sys.argv[1]), "--virtual" in sys.argv[2:])
