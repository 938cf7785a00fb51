"""Markers of the end-to-end suite."""


def pytest_configure(config):
    # A statistical claim (N of N replies valid) repeats one request many
    # times. Under ThreadSanitizer the server runs ~30x slower, so the TSan
    # stage of scripts/test.sh leaves these out: they add no thread
    # interleavings the single requests do not already drive.
    config.addinivalue_line("markers", "repeated: repeats one request many times to check a rate")
