import os
import shutil
import sys
import tempfile

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
