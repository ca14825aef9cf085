"""The compile cache's bound: least recently used entries and engine objects go past
AOTC_CACHE_MAX_SIZE, never one just used; a hit counts as a use. Each test uses a cache
folder of its own."""
import os
import time

import numpy as np
import pytest
from onnx import helper

import aotc
from aotc import cache, cli
from oracle import make_model

MIB = 1 << 20


def _entry(root, name, size, age):
    """A fake entry of `size` bytes last used `age` seconds ago."""
    path = root / name
    path.mkdir()
    (path / "lib.so").write_bytes(b"\0" * size)
    manifest = path / cache.MANIFEST
    manifest.write_text("{}")
    used = time.time() - age
    os.utime(manifest, (used, used))
    return path


def _object(root, name, size, age):
    objects = root / cache.OBJECTS_DIR
    objects.mkdir(exist_ok=True)
    path = objects / name
    path.write_bytes(b"\0" * size)
    used = time.time() - age
    os.utime(path, (used, used))
    return path


@pytest.fixture
def root(tmp_path, monkeypatch):
    monkeypatch.setenv("AOTC_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_trim_removes_the_least_recently_used_until_the_cache_fits(root, monkeypatch):
    root.mkdir()
    hour = 3600
    oldest = _entry(root, "a-1", 3 * MIB, 5 * hour)
    old_object = _object(root, "aotc_engine-1.o", 2 * MIB, 4 * hour)
    older = _entry(root, "b-2", 3 * MIB, 3 * hour)
    newer = _entry(root, "c-3", 3 * MIB, 2 * hour)
    newest = _entry(root, "d-4", 3 * MIB, 1 * hour)
    monkeypatch.setenv("AOTC_CACHE_MAX_SIZE", "7M")
    removed = cache.trim()
    assert removed == [str(oldest), str(old_object), str(older)]
    assert not oldest.exists() and not old_object.exists() and not older.exists()
    assert newer.exists() and newest.exists()
    assert sorted(os.listdir(root)) == ["c-3", "d-4", cache.OBJECTS_DIR]   # nothing renamed left


def test_trim_keeps_what_was_used_lately_and_what_it_is_told_to(root, monkeypatch):
    root.mkdir()
    kept = _entry(root, "a-1", 4 * MIB, 5 * 3600)
    lately = _entry(root, "b-2", 4 * MIB, cache.GRACE_SECONDS / 2)
    monkeypatch.setenv("AOTC_CACHE_MAX_SIZE", "1M")
    assert cache.trim(keep=[kept]) == []
    assert kept.exists() and lately.exists()
    assert cache.trim() == [str(kept)]


def test_no_bound_and_leftovers_of_killed_compiles(root, monkeypatch):
    root.mkdir()
    entry = _entry(root, "a-1", 2 * MIB, 5 * 3600)
    stale = root / ".a-xyz"
    stale.mkdir()
    old = time.time() - cache.STALE_SECONDS - 60
    os.utime(stale, (old, old))
    in_progress = root / ".b-abc"
    in_progress.mkdir()
    monkeypatch.setenv("AOTC_CACHE_MAX_SIZE", "0")
    assert cache.trim() == []
    assert entry.exists() and in_progress.exists() and not stale.exists()


@pytest.mark.parametrize("text, size", [("8G", 8 << 30), ("500M", 500 * MIB), ("1.5k", 1536),
                                        ("64MiB", 64 * MIB), ("1024", 1024), ("0", 0)])
def test_sizes(text, size):
    assert cache.parse_size(text) == size


def test_a_bad_size_is_an_aotc_error_before_any_compile(root, monkeypatch):
    monkeypatch.setenv("AOTC_CACHE_MAX_SIZE", "lots")
    with pytest.raises(aotc.AotcError, match="AOTC_CACHE_MAX_SIZE 'lots'"):
        aotc.compile(_model(1.0), threads=1)
    assert cache.items() == []


def _model(scale):
    """A model without the engine: no engine object in the cache to count."""
    w = np.full((2, 8), scale, dtype=np.float32)
    return make_model([helper.make_node("Mul", ["x", "w"], ["y"])], [("x", np.float32, (2, 8))],
                      [("y", np.float32, (2, 8))], {"w": w})


def test_compiles_stay_within_the_bound_and_an_evicted_model_compiles_again(root, monkeypatch):
    monkeypatch.setattr(cache, "GRACE_SECONDS", 0)
    monkeypatch.setattr(cache, "TRIM_INTERVAL_SECONDS", 0)
    x = np.ones((2, 8), dtype=np.float32)
    first = aotc.compile(_model(1.0), threads=1)
    np.testing.assert_array_equal(first.run(x), x)
    entry_bytes = sum(i.size for i in cache.items() if i.kind == "entry")
    monkeypatch.setenv("AOTC_CACHE_MAX_SIZE", str(entry_bytes + entry_bytes // 2))
    second = aotc.compile(_model(2.0), threads=1)
    entries = [i.path for i in cache.items() if i.kind == "entry"]
    assert entries == [second.out_dir]                # the first went, the second stayed
    np.testing.assert_array_equal(first.run(x), x)  # still loaded
    again = aotc.compile(_model(1.0), threads=1)
    np.testing.assert_array_equal(again.run(x), x)
    assert [i.path for i in cache.items() if i.kind == "entry"] == [again.out_dir]


def test_a_compile_trims_at_most_once_an_interval(root, monkeypatch):
    monkeypatch.setattr(cache, "GRACE_SECONDS", 0)
    monkeypatch.setenv("AOTC_CACHE_MAX_SIZE", "1")
    first = aotc.compile(_model(1.0), threads=1)    # trims (nothing else to remove)
    second = aotc.compile(_model(2.0), threads=1)   # within the interval: no trim
    assert sorted(i.path for i in cache.items()) == sorted([first.out_dir, second.out_dir])
    stamp = root / cache.TRIM_STAMP
    old = time.time() - cache.TRIM_INTERVAL_SECONDS - 1
    os.utime(stamp, (old, old))
    third = aotc.compile(_model(3.0), threads=1)
    assert [i.path for i in cache.items()] == [third.out_dir]


def test_a_hit_counts_as_a_use(root):
    sess = aotc.compile(_model(1.0), threads=1)
    manifest = os.path.join(sess.out_dir, cache.MANIFEST)
    old = time.time() - 3600
    os.utime(manifest, (old, old))
    assert aotc.compile(_model(1.0), threads=1).out_dir == sess.out_dir
    assert time.time() - os.stat(manifest).st_mtime < 60


def test_the_cache_command_shows_trims_and_clears(root, monkeypatch, capsys):
    root.mkdir()
    _entry(root, "a-1", 3 * MIB, 5 * 3600)
    _entry(root, "b-2", 3 * MIB, 4 * 3600)
    _object(root, "aotc_engine-1.o", MIB, 3 * 3600)
    assert cli.main(["cache"]) == 0
    assert "2 compiled models and 1 engine objects, 7.0 MiB" in capsys.readouterr().out
    monkeypatch.setenv("AOTC_CACHE_MAX_SIZE", "5M")
    assert cli.main(["cache", "--trim"]) == 0
    assert "1 compiled models and 1 engine objects, 4.0 MiB" in capsys.readouterr().out
    assert cli.main(["cache", "--clear"]) == 0
    assert "0 compiled models and 0 engine objects, 0.0 MiB" in capsys.readouterr().out
