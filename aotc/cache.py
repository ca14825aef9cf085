"""The compile cache: where it lives, and the bound on its size.

Each compile is an entry (a complete output folder with its manifest.json) named
<model>-<digest>; the engine objects shared by entries sit in OBJECTS_DIR. Entries and
objects are used whole, so the cache is trimmed whole ones at a time, least recently
used first (compile() touches an entry's manifest on every hit, build.engine_object an
object on every reuse), down to AOTC_CACHE_MAX_SIZE. A trim sizes every entry (about
0.2 ms each), so compile() asks for one after a new entry at most once every
TRIM_INTERVAL_SECONDS: a test suite's thousands of small compiles would otherwise spend
minutes sizing, and a minute's compiles are what the bound can overshoot by. Anything
used within GRACE_SECONDS stays: another process may be between finding it and loading it.
"""
import collections
import os
import re
import shutil
import time

OBJECTS_DIR = "objects"   # objects shared by entries (build.engine_object)
MANIFEST = "manifest.json"
DEFAULT_MAX_SIZE = "8G"
GRACE_SECONDS = 600
TRIM_INTERVAL_SECONDS = 60
TRIM_STAMP = ".last-trim"
# Folders a compile makes and renames into place start with a dot; one that old is
# left over from a killed process.
STALE_SECONDS = 24 * 3600
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def cache_root():
    root = os.environ.get("AOTC_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "aotc")
    os.makedirs(root, exist_ok=True)
    return root


def parse_size(text):
    """'8G', '500M', '1024' (bytes) -> bytes; '0' means no bound."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*", str(text), re.IGNORECASE)
    if not match:
        from .errors import Unsupported
        raise Unsupported(f"AOTC_CACHE_MAX_SIZE {text!r} is not a size such as 8G, 500M or 0")
    return int(float(match.group(1)) * _UNITS[match.group(2).upper()])


def max_size():
    """The bound in bytes (0: none), from AOTC_CACHE_MAX_SIZE."""
    return parse_size(os.environ.get("AOTC_CACHE_MAX_SIZE", DEFAULT_MAX_SIZE))


def touch(path):
    """Mark an entry (by its manifest) or an object as just used."""
    target = os.path.join(path, MANIFEST) if os.path.isdir(path) else path
    try:
        os.utime(target)
    except OSError:
        pass   # a read-only cache still serves; it only ages


# An entry or an object (kind), removed whole: its path, last use and bytes.
Item = collections.namedtuple("Item", "kind path used size")


def _folder_bytes(path):
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total


def items(root=None):
    """Every entry and object in the cache, each with its last use and its bytes."""
    root = root or cache_root()
    found = []
    for d in os.scandir(root):
        try:
            if d.name == OBJECTS_DIR and d.is_dir():
                for o in os.scandir(d.path):
                    if o.name.endswith(".o") and not o.name.startswith(".") and o.is_file():
                        st = o.stat()
                        found.append(Item("object", o.path, st.st_mtime, st.st_size))
            elif not d.name.startswith(".") and d.is_dir():
                used = os.stat(os.path.join(d.path, MANIFEST)).st_mtime
                found.append(Item("entry", d.path, used, _folder_bytes(d.path)))
        except FileNotFoundError:
            continue   # not an entry (no manifest), or removed meanwhile
    return found


def remove(path):
    """Take an entry or object out of use at once (a rename), then delete it."""
    parent, name = os.path.split(path)
    doomed = os.path.join(parent, f".evicted-{os.getpid()}-{name}")
    try:
        os.rename(path, doomed)
    except OSError:
        return   # gone already
    if os.path.isdir(doomed):
        shutil.rmtree(doomed, ignore_errors=True)
    else:
        os.remove(doomed)


def trim(keep=(), root=None, now=None):
    """Remove the least recently used entries and objects until the cache is within
    max_size(), never one in `keep` or used within GRACE_SECONDS; also folders left
    over from killed compiles. Returns the removed paths."""
    root = root or cache_root()
    now = time.time() if now is None else now
    _remove_leftovers(root, now)
    limit = max_size()
    if not limit:
        return []
    found = items(root)
    total = sum(i.size for i in found)
    keep = {os.path.realpath(p) for p in keep}
    removed = []
    for item in sorted(found, key=lambda i: i.used):
        if total <= limit:
            break
        if now - item.used < GRACE_SECONDS or os.path.realpath(item.path) in keep:
            continue
        remove(item.path)
        total -= item.size
        removed.append(item.path)
    return removed


def trim_if_due(keep=(), root=None):
    """trim(), unless a trim started within TRIM_INTERVAL_SECONDS."""
    root = root or cache_root()
    stamp, now = os.path.join(root, TRIM_STAMP), time.time()
    try:
        if now - os.stat(stamp).st_mtime < TRIM_INTERVAL_SECONDS:
            return []
    except FileNotFoundError:
        pass
    try:
        with open(stamp, "w"):
            pass
    except OSError:
        return []   # a read-only cache is not trimmed
    return trim(keep, root, now)


def _remove_leftovers(root, now):
    for d in os.scandir(root):
        if not d.name.startswith("."):
            continue
        try:
            stale = d.name.startswith(".evicted-") or now - d.stat().st_mtime > STALE_SECONDS
        except FileNotFoundError:
            continue
        if stale and d.is_dir():
            shutil.rmtree(d.path, ignore_errors=True)


def clear(root=None):
    """Remove every entry and object (the conformance suite's cases stay)."""
    root = root or cache_root()
    for item in items(root):
        remove(item.path)
