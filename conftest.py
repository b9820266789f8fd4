"""Root conftest: loads the perfgate pytest plugin for tests/ and perf_tests/ alike, and pytester
for the plugin's end-to-end tests. Where perfgate is installed, its pytest11 entry point has
loaded the plugin already under this same name, "perfgate.plugin", and pytest skips it here
(tests/test_packaging.py checks both ways)."""

pytest_plugins = ("perfgate.plugin", "pytester")
