import os
import sys
import tempfile

# Compiles in tests go to a cache of their own, never the user's.
os.environ.setdefault("AOTC_CACHE_DIR", tempfile.mkdtemp(prefix="aotc-test-cache-"))
sys.path.insert(0, os.path.dirname(__file__))
