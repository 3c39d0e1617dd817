import threading
import time

import numpy as np
import pytest

from paravt_env.video import Frames, OverviewCache


def _frames(n=2, value=0):
    return Frames(images=np.full((n, 4, 4, 3), value, np.uint8), timestamps=np.arange(n, dtype=float))


def test_hit_miss_and_readonly(tmp_path):
    path = tmp_path / "v.mp4"
    path.write_bytes(b"x")
    cache = OverviewCache()
    calls = []
    first = cache.get_or_compute(str(path), ("k", 8), lambda: calls.append(1) or _frames())
    second = cache.get_or_compute(str(path), ("k", 8), lambda: calls.append(1) or _frames())
    assert first is second and calls == [1] and (cache.hits, cache.misses) == (1, 1)
    with pytest.raises(ValueError):
        first.images[0, 0, 0, 0] = 1  # shared between rollouts: read-only


def test_rewritten_file_is_not_served_stale(tmp_path):
    path = tmp_path / "v.mp4"
    path.write_bytes(b"x")
    cache = OverviewCache()
    a = cache.get_or_compute(str(path), 1, lambda: _frames(value=1))
    path.write_bytes(b"xy")
    b = cache.get_or_compute(str(path), 1, lambda: _frames(value=2))
    assert a.images[0, 0, 0, 0] == 1 and b.images[0, 0, 0, 0] == 2


def test_bounded_by_bytes(tmp_path):
    path = tmp_path / "v.mp4"
    path.write_bytes(b"x")
    one = _frames().images.nbytes
    cache = OverviewCache(max_bytes=2 * one)
    for k in range(5):
        cache.get_or_compute(str(path), k, _frames)
    assert len(cache) == 2


def test_single_flight_under_concurrency(tmp_path):
    path = tmp_path / "v.mp4"
    path.write_bytes(b"x")
    cache = OverviewCache()
    calls = []

    def slow():
        calls.append(1)
        time.sleep(0.2)
        return _frames()

    results = []
    threads = [threading.Thread(target=lambda: results.append(cache.get_or_compute(str(path), 0, slow))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and len(results) == 8 and all(r is results[0] for r in results)


def test_failure_propagates_and_is_not_cached(tmp_path):
    path = tmp_path / "v.mp4"
    path.write_bytes(b"x")
    cache = OverviewCache()

    def boom():
        raise RuntimeError("decode failed")

    with pytest.raises(RuntimeError, match="decode failed"):
        cache.get_or_compute(str(path), 0, boom)
    assert cache.get_or_compute(str(path), 0, _frames) is not None
