from __future__ import annotations

import pytest

from pytest_gemm.records.shapes import SHAPE_SETS, Shape, ShapeError, parse_shapes


def test_sizes_and_triples_in_order_without_repeats():
    assert parse_shapes("1024, 4096x4096x1024,1024") == [Shape(1024, 1024, 1024), Shape(4096, 4096, 1024)]


def test_set_names_mix_with_shapes():
    shapes = parse_shapes("quick,7x9x11")
    assert shapes[: len(SHAPE_SETS["quick"])] == SHAPE_SETS["quick"]
    assert shapes[-1] == Shape(7, 9, 11)


@pytest.mark.parametrize("bad", ["huge", "10x10", "0", "4x0x4", "1e3", ""])
def test_bad_shapes_are_explained(bad):
    with pytest.raises(ShapeError):
        parse_shapes(bad)


def test_edge_set_covers_tile_boundaries_in_every_dimension():
    edge = SHAPE_SETS["edge"]
    for t in (16, 32, 64, 128, 256):
        for dim in ("M", "N", "K"):
            seen = {getattr(s, dim) for s in edge}
            assert {t - 1, t, t + 1} <= seen, (t, dim)


def test_edge_set_has_small_odd_skinny_and_huge_k():
    edge = SHAPE_SETS["edge"]
    ks = {s.K for s in edge}
    assert set(range(1, 10)) <= ks
    assert any(s.K % 2 and s.K > 9 for s in edge)
    assert any(s.M == 1 for s in edge) and any(s.N == 1 for s in edge)
    assert {Shape(16, 8192, 8192), Shape(8192, 16, 8192), Shape(8192, 8192, 16)} <= set(edge)
    assert max(s.K for s in edge) >= 65536


def test_shape_ids():
    assert Shape(4096, 4096, 1024).id == "4096x4096x1024"
    assert Shape(2, 3, 4).flops == 48
