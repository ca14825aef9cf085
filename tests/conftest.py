import os
import shutil
import sys
import tempfile

import pytest

# Compiles in tests go to a cache of their own, never the user's. The process that makes
# it (pytest itself, not its xdist workers, which inherit the variable) removes it at the
# end: a full run leaves gigabytes of compiled models behind otherwise.
_OWN_CACHE = None
if "AOTC_CACHE_DIR" not in os.environ:
    _OWN_CACHE = tempfile.mkdtemp(prefix="aotc-test-cache-")
    os.environ["AOTC_CACHE_DIR"] = _OWN_CACHE
sys.path.insert(0, os.path.dirname(__file__))


def pytest_sessionfinish(session, exitstatus):
    if _OWN_CACHE is not None:
        shutil.rmtree(_OWN_CACHE, ignore_errors=True)


@pytest.fixture(scope="session")
def cache_without_pixels(tmp_path_factory):
    return str(tmp_path_factory.mktemp("cache-without-pixels"))


@pytest.fixture
def without_pixels_kernel(monkeypatch, cache_without_pixels):
    """2-D convs with small weights known at compile time go to the implicit and rows
    kernels, as those with run-time or larger weights do; compiled into a cache of their
    own (the cache's key knows the model, not the kernel choice)."""
    from aotc.ops import conv
    monkeypatch.setattr(conv, "PIXELS_MAX_WEIGHT_BYTES", -1)
    monkeypatch.setenv("AOTC_CACHE_DIR", cache_without_pixels)
