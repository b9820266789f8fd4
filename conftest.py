"""Root conftest: loads the perfgate pytest plugin for tests/ and perf_tests/ alike."""

pytest_plugins = ("perfgate.plugin",)
