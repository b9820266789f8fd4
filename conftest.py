"""Root conftest: loads the perfgate pytest plugin for tests/ and perf_tests/ alike, and pytester
for the plugin's end-to-end tests."""

pytest_plugins = ("perfgate.plugin", "pytester")
