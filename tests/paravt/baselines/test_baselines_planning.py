import pytest

from paravt.baselines.planning import SEARCH_SPACING, gaps_in, plan_points, uniform_windows, windows_for


def test_gaps_count_region_ends_as_seen():
    assert gaps_in([10, 20, 95], 0, 50) == [(0, 10), (10, 20), (20, 50)]
    assert gaps_in([], 5, 9) == [(5, 9)]


def test_plan_points_respects_budget_and_target():
    gaps = gaps_in([50, 150, 250], 0, 300)
    pts = plan_points(gaps, budget=80)
    assert 70 <= len(pts) <= 80
    assert plan_points(gaps, budget=1000) == plan_points(gaps, budget=10_000)  # target spacing reached
    dense = sorted([0, 50, 150, 250, 300, *plan_points(gaps, budget=1000)])
    assert max(b - a for a, b in zip(dense, dense[1:], strict=False)) <= SEARCH_SPACING + 1e-9
    assert plan_points([(0, 1.5)], budget=10) == []  # nothing can hide in a 1.5 s gap


@pytest.mark.parametrize("n_crops", [1, 2, 5])
def test_windows_cover_points_within_limits(n_crops):
    pts = plan_points(gaps_in([37.5 * i + 18.75 for i in range(16)], 0, 600), budget=16 * n_crops)
    wins = windows_for(pts, n_crops, 16, 600)
    assert 1 <= len(wins) <= n_crops
    assert all(a >= 0 and b <= 600 and b - a >= 0.5 for a, b in wins)
    covered = sum(1 for p in pts if any(a <= p <= b for a, b in wins))
    assert covered == len(pts)


def test_full_windows_put_frames_on_planned_points():
    # 80 midpoints 7.5 s apart, 5 crops of 16 frames: each window's frame centres are the points
    pts = [3.75 + 7.5 * i for i in range(80)]
    wins = windows_for(pts, 5, 16, 600)
    assert len(wins) == 5
    for (a, b), chunk in zip(wins, [pts[i * 16 : (i + 1) * 16] for i in range(5)], strict=True):
        centres = [a + (j + 0.5) * (b - a) / 16 for j in range(16)]
        assert max(abs(c - p) for c, p in zip(centres, chunk, strict=True)) < 0.05


def test_separate_regions_get_separate_windows():
    wins = windows_for([10, 11, 12, 300, 301, 302], 2, 16, 600)
    assert len(wins) == 2 and wins[0][1] < 100 < wins[1][0]


def test_uniform_windows_tile_the_video():
    assert uniform_windows(100, 4) == [(0, 25), (25, 50), (50, 75), (75, 100)]
