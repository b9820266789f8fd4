"""Root conftest: loads the perfgate pytest plugin and this repository's suite plugin
(perf_tests/suite.py: --device, --perf-tier, --perf-malloc, the bench_device and perf_tier
fixtures) for tests/ and perf_tests/ alike, and pytester for the plugin's end-to-end tests. The
suite turns perfgate on for every session (``perfgate = true`` in pyproject.toml) and keeps its
runs in baselines/<hardware key>/. Where perfgate is installed, its pytest11 entry point has
loaded the plugin already under this same name, "perfgate.plugin", and pytest skips it here
(tests/test_packaging.py checks both ways)."""

pytest_plugins = ("perfgate.plugin", "perf_tests.suite", "pytester")
