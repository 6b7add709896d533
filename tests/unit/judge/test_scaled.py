"""FP8 and INT8 on the CPU: quantisation, the exact truth, the bound, the misreadings a wrong kernel is named by,
and the header's keys. Outputs are simulated with NumPy as a kernel would compute them (fp32 sums, bf16 stores)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from pytest_gemm.judge.accuracy import Truth
from pytest_gemm.judge.figures import calc_diff, cosine
from pytest_gemm.judge.misread import misreading
from pytest_gemm.judge.scale_misread import int_candidates, scale_candidates
from pytest_gemm.judge.scaled import FP8_MAX, dequantised, draw_int8, draw_quantised, fp8_table, scale_values
from pytest_gemm.records.dtypes import get_dtype
from pytest_gemm.records.scales import Scales
from pytest_gemm.records.shapes import Shape
from pytest_gemm.records.storage import Storage
from pytest_gemm.records.verdicts import Misreading
from pytest_gemm.specs.cases import expand
from pytest_gemm.specs.cufile import parse_cu_source
from pytest_gemm.specs.errors import KernelFileError

from support import FP8_ARGS, SCALED_HEADER

BLOCKWISE = Scales("1x128", "128x128", A_stored="KxM", B_stored="NxK", align=16)
MODES = [BLOCKWISE, Scales("row", "col"), Scales("tensor", "tensor"), Scales("1x128", "128x128", type="ue8m0")]


def _case(scales: Scales, shape: Shape, fmt: str = "fp8_e4m3", seed: int = 0):
    """A case's FP8 elements (float64), grids (float64) and exact operands."""
    rng = np.random.default_rng(seed)
    (qa, sa), (qb, sb) = (draw_quantised(rng, op, shape, fmt, scales) for op in "AB")
    values = qa.astype(np.float64), qb.astype(np.float64)
    grids = scale_values(np, sa, scales.type), scale_values(np, sb, scales.type)
    exact = [dequantised(np, v, g, scales.block(op, shape)) for v, g, op in zip(values, grids, "AB")]
    return (qa, qb), values, grids, exact


def _bf16(x: np.ndarray) -> np.ndarray:
    """A kernel's fp32 result stored as bf16, read back as float64."""
    return x.astype(np.float32).astype(ml_dtypes.bfloat16).astype(np.float64)


@pytest.mark.parametrize("scales", MODES, ids=lambda s: s.describe())
@pytest.mark.parametrize("fmt", ["fp8_e4m3", "fp8_e5m2"])
def test_quantised_blocks_reach_the_formats_maximum_and_dequantise_exactly(scales, fmt):
    shape = Shape(300, 260, 700)  # partial blocks at every edge
    (qa, qb), values, grids, exact = _case(scales, shape, fmt)
    for op, q, v, g in zip("AB", (qa, qb), values, grids):
        assert g.shape == scales.grid(op, shape)
        assert np.all(g > 0) and np.all(np.isfinite(g))  # never a zero, NaN or infinite scale
        assert np.abs(v).max() <= FP8_MAX[fmt]
        block = scales.block(op, shape)
        amax = np.zeros(g.shape)
        for i in range(g.shape[0]):
            for j in range(g.shape[1]):
                amax[i, j] = np.abs(v[i * block[0] : (i + 1) * block[0], j * block[1] : (j + 1) * block[1]]).max()
        if scales.type == "fp32":
            assert np.all(amax == FP8_MAX[fmt])  # each block's largest element is the format's largest
        else:
            assert np.all(np.log2(g) == np.round(np.log2(g)))  # UE8M0: powers of two
            assert np.all(amax > FP8_MAX[fmt] / 4)
        assert np.array_equal(fp8_table(fmt)[q.view(np.uint8)], v)  # the table the worker reads bytes with
    # the truth's operands are exactly q * s: a block's scale times each of its elements, no rounding
    a = exact[0]
    assert a[0, 0] == values[0][0, 0] * grids[0][0, 0]


def test_a_correct_fp8_kernel_passes_with_margin_and_reports_calc_diff_and_cosine():
    shape = Shape(256, 384, 1024)
    _, _, _, (a, b) = _case(BLOCKWISE, shape)
    truth = Truth.of(np, a, b, None, 1.0, 0.0, get_dtype("bf16"))
    truth.figures = True
    got = _bf16(a.astype(np.float32) @ b.astype(np.float32))
    stats = truth.judge(np, got, shape.K, get_dtype("fp8_e4m3"), get_dtype("bf16"))
    assert stats.passed and stats.margin > 3
    assert 0 < stats.calc_diff < 1e-4 and 1 - 1e-4 < stats.cosine < 1


def test_an_fp8_kernel_that_rounds_its_sums_to_bf16_fails_the_normwise_test():
    shape = Shape(128, 128, 4096)
    _, _, _, (a, b) = _case(BLOCKWISE, shape)
    truth = Truth.of(np, a, b, None, 1.0, 0.0, get_dtype("fp32"))
    acc = np.zeros((shape.M, shape.N))
    for k0 in range(0, shape.K, 128):  # partial sums kept in bf16: a precision cheat
        acc = _bf16(acc + a[:, k0 : k0 + 128] @ b[k0 : k0 + 128])
    stats = truth.judge(np, acc, shape.K, get_dtype("fp8_e4m3"), get_dtype("fp32"))
    assert not stats.passed


def _named(scales: Scales, shape: Shape, got: np.ndarray, values, grids, exact, other=None):
    truth = Truth.of(np, *exact, None, 1.0, 0.0, get_dtype("bf16"))
    stats = truth.judge(np, got, shape.K, get_dtype("fp8_e4m3"), get_dtype("bf16"))
    assert not stats.passed
    extra = scale_candidates(np, values, grids, tuple(exact), scales, shape, other)
    return misreading(np, got, *exact, None, 1.0, 0.0, Storage(), get_dtype("fp8_e4m3"), get_dtype("bf16"), truth,
                      extra=extra)  # fmt: skip


def test_each_scale_misreading_is_named():
    shape = Shape(384, 256, 640)
    _, values, grids, exact = _case(BLOCKWISE, shape)
    (va, vb), (ga, gb), (a, b) = values, grids, exact
    by_128 = ga[np.arange(shape.M)[:, None] // 128, np.arange(shape.K)[None, :] // 128]  # A's grid at 128 x 128
    other_b = gb.T.reshape(-1).reshape(gb.shape)  # B's grid stored N x K (its memory), read as if stored K x N
    cases = {
        Misreading.SCALES_IGNORED: va @ vb,
        Misreading.A_SCALES_IGNORED: va @ b,
        Misreading.B_SCALES_IGNORED: a @ vb,
        Misreading.A_SCALES_GRANULARITY: (va * by_128) @ b,
        Misreading.B_SCALES_TRANSPOSED: a @ dequantised(np, vb, other_b, (128, 128)),
    }
    for kind, product in cases.items():
        found = _named(BLOCKWISE, shape, _bf16(product), values, grids, exact)
        assert found is not None and found.kind == kind, (kind, found)
        if kind == Misreading.A_SCALES_GRANULARITY:
            assert found.as_read == "128x128"


def test_e5m2_data_read_as_e4m3_is_named():
    shape = Shape(256, 256, 512)
    scales = Scales("1x128", "128x128")
    (qa, qb), values, grids, exact = _case(scales, shape, "fp8_e5m2")
    read = [fp8_table("fp8_e4m3")[q.view(np.uint8)] for q in (qa, qb)]
    assert all(np.isfinite(r).all() for r in read)  # e5m2 bytes are all finite as e4m3
    got = _bf16(dequantised(np, read[0], grids[0], (1, 128)) @ dequantised(np, read[1], grids[1], (128, 128)))
    truth = Truth.of(np, *exact, None, 1.0, 0.0, get_dtype("bf16"))
    extra = scale_candidates(np, values, grids, tuple(exact), scales, shape, tuple(read))
    found = misreading(np, got, *exact, None, 1.0, 0.0, Storage(), get_dtype("fp8_e5m2"), get_dtype("bf16"), truth,
                       extra=extra)  # fmt: skip
    assert found is not None and found.kind == Misreading.OTHER_FP8


def test_int8_is_judged_bit_for_bit_and_a_16_bit_accumulator_is_named():
    rng = np.random.default_rng(3)
    a, b = draw_int8(rng, 64, 512).astype(np.float64), draw_int8(rng, 512, 48).astype(np.float64)
    assert a.min() >= -127 and a.max() <= 127
    truth = Truth.of(np, a, b, None, 1.0, 0.0, get_dtype("int32"))
    int8, int32 = get_dtype("int8"), get_dtype("int32")
    assert truth.judge(np, a @ b, 512, int8, int32).passed
    off = a @ b
    off[3, 4] += 1
    stats = truth.judge(np, off, 512, int8, int32)
    assert not stats.passed and stats.bad == 1  # one unit wrong is wrong: exact arithmetic
    wrapped = (a @ b + 32768) % 65536 - 32768
    assert not truth.judge(np, wrapped, 512, int8, int32).passed
    extra = int_candidates(np, truth.value, truth.gscale)
    found = misreading(np, wrapped, a, b, None, 1.0, 0.0, Storage(), int8, int32, truth, extra=extra)
    assert found is not None and found.kind == Misreading.INT16_ACCUMULATION


def test_calc_diff_and_cosine_are_the_peers_figures():
    x = np.array([[1.0, 2.0], [3.0, -4.0]])
    assert calc_diff(np, x, x) == pytest.approx(0.0, abs=1e-15) and cosine(np, x, x) == pytest.approx(1.0)
    assert calc_diff(np, -x, x) == pytest.approx(2.0) and cosine(np, -x, x) == pytest.approx(-1.0)


@pytest.mark.parametrize(
    ("args", "dtypes", "extra", "key", "message"),
    [
        (FP8_ARGS, '["fp8_e4m3"]', "", "scales", "an FP8 kernel declares how its operands are scaled"),
        ('["A", "B", "C", "M", "N", "K"]', '["fp16"]', 'scales = { A = "row", B = "col" }', "scales", "only FP8"),
        (FP8_ARGS, '["fp8_e4m3"]', 'scales = { A = "128x128", B = "col" }', "scales", "A: expected one of"),
        (FP8_ARGS, '["fp8_e4m3"]', 'scales = { A = "row", B = "col", type = "e8m0" }', "scales", "type"),
        (FP8_ARGS, '["fp8_e4m3"]', 'scales = { A = "row", B = "col", align = 12 }', "scales", "power of two"),
        (FP8_ARGS, '["fp8_e4m3"]', 'scales = { A = "row", B = "col", stored = { A = "NxK" } }', "scales", "KxM"),
        ('["A", "B", "C", "M", "N", "K"]', '["fp8_e4m3"]', 'scales = { A = "row", B = "col" }', "args", "scale_a"),
        ('["A", "B", "C", "scale_a", "M", "N", "K"]', '["fp16"]', "", "args", "scale"),
        ('["A", "B", "C", "alpha", "beta", "M", "N", "K"]', '["int8"]', "", "args", "no alpha and beta"),
        ('["A", "B", "C", "M", "N", "K"]', '["int8"]', 'c_dtype = "fp16"', "c_dtype", "int32"),
        ('["A", "B", "C", "M", "N", "K"]', '["int32"]', "", "dtypes", "INT8's output"),
        ('["A", "B", "C", "M", "N", "K"]', '["int8", "fp16"]', "", "dtypes", "mixes"),
    ],
)
def test_malformed_fp8_and_int8_headers_name_the_key(args, dtypes, extra, key, message):
    with pytest.raises(KernelFileError) as info:
        parse_cu_source("kernels/k.cu", SCALED_HEADER.format(args=args, dtypes=dtypes, extra=extra))
    assert f"key '{key}'" in str(info.value) and message in str(info.value)


def test_fp8_defaults_and_the_int8_rule():
    (spec,) = parse_cu_source(
        "k.cu",
        SCALED_HEADER.format(args=FP8_ARGS, dtypes='["fp8_e4m3"]', extra='scales = { A = "1x128", B = "128x128" }'),
    )
    assert spec.output_dtype("fp8_e4m3") == "bf16" and not spec.alpha_beta
    assert spec.scales.grid("B", Shape(100, 300, 1000)) == (8, 3)
    (int8,) = parse_cu_source(
        "k.cu", SCALED_HEADER.format(args='["A", "B", "C", "M", "N", "K"]', dtypes='["int8"]', extra="")
    )
    assert int8.output_dtype("int8") == "int32"
    ok, past = expand(int8, [Shape(64, 64, 133144), Shape(64, 64, 133145)])
    assert ok.skip_reason is None and "K <= 133144" in past.skip_reason


def test_a_failure_shows_calc_diff_and_the_granularity_read(tmp_path):
    """The words of an FP8 diagnosis survive a saved run's JSON: the block the scales were read at, the declared
    scales, and calc_diff and the cosine similarity beside the bound."""
    from pytest_gemm.records.declarations import Declarations
    from pytest_gemm.records.diagnosis import Diagnosis, Finding
    from pytest_gemm.records.outcome import ErrorStats
    from pytest_gemm.records.plain import from_plain, to_plain
    from pytest_gemm.records.verdicts import Verdict
    from pytest_gemm.report.failure import diagnosis_lines, stats_line

    stats = ErrorStats(
        max_ratio=30.0, median_ratio=9.0, bad=262144, total=262144, nonfinite=0, unwritten=0, norm_error=0.3,
        norm_tol=5e-4, worst=((0, 0, 1.0, 2.0, 30.0),), bad_tiles=((0, 0),), n_bad_tiles=256, n_tiles=256,
        calc_diff=0.0456, cosine=0.95,
    )  # fmt: skip
    finding = Finding(Misreading.A_SCALES_GRANULARITY, 262144, as_read="128x128")
    diagnosis = Diagnosis(Verdict.WRONG_OUTPUT, "fp8_e4m3", Shape(512, 512, 512), 1.0, 0.0, findings=(finding,),
                          kernel=stats, declared=Declarations(scales=BLOCKWISE))  # fmt: skip
    back = from_plain(Diagnosis, to_plain(diagnosis))
    assert back == diagnosis
    line = diagnosis_lines(back)[0]
    assert line.startswith("matches A's scales applied at 128 x 128 blocks")
    assert "the header declares A 1x128 (stored KxM), B 128x128 (stored NxK), fp32, rows padded to 16 bytes" in line
    assert "calc_diff 0.0456, cosine similarity 0.950000000" in stats_line(stats)


@pytest.mark.parametrize(
    ("dtype", "kind", "said"),
    [
        ("int8", Misreading.INT16_ACCUMULATION, "matches the sums accumulated in 16 bits (they wrap past 32767"),
        ("fp8_e4m3", Misreading.OTHER_FP8, "matches A and B read as fp8_e5m2, the other FP8 format"),
        ("fp8_e5m2", Misreading.OTHER_FP8, "matches A and B read as fp8_e4m3, the other FP8 format"),
        ("fp8_e4m3", Misreading.SCALES_IGNORED, "matches the scales ignored (C = A B"),
        ("fp8_e5m2", Misreading.B_SCALES_TRANSPOSED, "matches B's grid of scales read in its other order"),
    ],
)
def test_each_scaled_and_integer_misreading_is_said_in_words(dtype, kind, said):
    """Every FP8 and INT8 misreading reads as a sentence for its dtype (the other FP8 format named)."""
    from pytest_gemm.records.diagnosis import Diagnosis, Finding
    from pytest_gemm.records.verdicts import Verdict
    from pytest_gemm.report.failure import diagnosis_lines

    diagnosis = Diagnosis(Verdict.WRONG_OUTPUT, dtype, Shape(512, 512, 512), 1.0, 0.0,
                          findings=(Finding(kind, 262144),))  # fmt: skip
    assert diagnosis_lines(diagnosis)[0].startswith(said)


@pytest.mark.parametrize(
    ("dtype", "scales", "shape", "said"),
    [
        ("fp8_e5m2", 'scales = { A = "row", B = "col" }', Shape(256, 256, 256), "no e5m2 x e5m2"),
        ("fp8_e4m3", 'scales = { A = "tensor", B = "128x128" }', Shape(256, 256, 256), "A tensor with B 128x128"),
        ("fp8_e4m3", 'scales = { A = "1x128", B = "col" }', Shape(256, 256, 256), "A 1x128 with B col"),
        ("fp8_e4m3", 'scales = { A = "row", B = "col" }', Shape(256, 250, 256), "K and N multiples of 16"),
        ("fp8_e4m3", 'scales = { A = "1x128", B = "128x128" }', Shape(1, 256, 256), "M a multiple of 4"),
        ("int8", "", Shape(255, 256, 256), "M, N and K multiples of 4"),
    ],
)
def test_cases_cublas_has_no_gemm_for_say_why(dtype, scales, shape, said):
    """Which FP8 and INT8 cases the peer cannot compute (measured on an H100): they are verified without it and not
    timed, saying why."""
    from pytest_gemm.worker.inputs import input_strategy
    from pytest_gemm.worker.peers import peer_strategy

    def no_peer(case, capability):
        return peer_strategy(case, input_strategy(case), capability).reason or None

    args = FP8_ARGS if dtype != "int8" else '["A", "B", "C", "M", "N", "K"]'
    (spec,) = parse_cu_source("k.cu", SCALED_HEADER.format(args=args, dtypes=f'["{dtype}"]', extra=scales))
    (case,) = expand(spec, [shape])
    assert said in no_peer(case, (9, 0))
    if dtype == "int8":
        (aligned,) = expand(spec, [Shape(256, 256, 256)])
        assert no_peer(aligned, (9, 0)) is None


def test_a_reading_that_holds_nan_matches_no_finite_output():
    """e4m3 bytes read as e5m2 are NaN in every block (its 448 is 0x7E): that reading must not swallow another fault."""
    shape = Shape(384, 256, 640)
    (qa, qb), values, grids, exact = _case(BLOCKWISE, shape)
    other = tuple(fp8_table("fp8_e5m2")[q.view(np.uint8)] for q in (qa, qb))
    assert all(np.isnan(o).any() for o in other)
    got = _bf16(values[0] @ values[1])  # the scales ignored
    with np.errstate(invalid="ignore"):  # NumPy's products of the NaN reading
        found = _named(BLOCKWISE, shape, got, values, grids, exact, other)
        assert found is not None and found.kind == Misreading.SCALES_IGNORED
        everywhere = np.full((shape.M, shape.N), np.nan)  # what reading e4m3 as e5m2 gives
        found = _named(BLOCKWISE, shape, everywhere, values, grids, exact, other)
    assert found is not None and found.kind == Misreading.OTHER_FP8


def test_nan_from_a_guard_is_not_named_a_read_in_the_other_format():
    """An output NaN everywhere matches e4m3 bytes read as e5m2; where the worker traced the NaN to a guard (a read past
    a grid of scales), that is the finding, and the reading is not named."""
    from dataclasses import replace

    from pytest_gemm.judge.case import findings
    from pytest_gemm.records.outcome import ErrorSource, ErrorStats, Misread, Verification
    from pytest_gemm.records.verdicts import ErrorCause

    nan = ErrorStats(np.inf, np.inf, 16, 16, 16, 0, np.inf, 1e-3, ((0, 0, np.nan, 1.0, np.inf),), ((0, 0),), 1, 1)
    read = Misread(Misreading.OTHER_FP8, 16)
    base = Verification("k", 1, Shape(4, 4, 128), 1.0, 0.0, nan, None, misread=read)
    assert findings(base)[0].kind == Misreading.OTHER_FP8
    past = ErrorSource(ErrorCause.GUARD_SCALES, 16, (0, 3), (0, 3), 1, "the guard after scale_a")
    kinds = [f.kind for f in findings(replace(base, sources=(past,)))]
    assert Misreading.OTHER_FP8 not in kinds and kinds[0] == ErrorCause.GUARD_SCALES
