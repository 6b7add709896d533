"""CUPTI's activity buffers read raw, on the CPU: synthetic buffers of records of several kinds and sizes, parsed
with a synthetic layout table, give the rows (and the spans) the records hold; no GPU, CUPTI or cupti-python."""

from __future__ import annotations

import ctypes
from types import SimpleNamespace

import numpy as np
import pytest

from pytest_gemm.worker import cupti_records
from pytest_gemm.worker.cupti_buffers import ActivityBuffers, libcupti_path, read_c_string
from pytest_gemm.worker.cupti_clock import MARK_KERNEL, PREPARE_KERNEL, CuptiClock, Span, build_spans
from pytest_gemm.worker.cupti_records import (
    CONCURRENT_KERNEL,
    MEMCPY,
    MEMSET,
    CuptiError,
    layouts_from,
    parse_records,
)

U4, U8, I4, I8 = np.dtype(np.uint32), np.dtype(np.uint64), np.dtype(np.int32), np.dtype(np.int64)
OTHER_KIND = 5  # a kind that is not collected (CUPTI_ACTIVITY_KIND_RUNTIME)
# record sizes and field offsets unlike CUPTI's own, so that only the table can place them
SIZES = {CONCURRENT_KERNEL: 64, MEMSET: 40, MEMCPY: 48, OTHER_KIND: 24}
LAYOUTS = {
    CONCURRENT_KERNEL: {"kind": (0, I4), "stream_id": (8, U4), "start": (16, U8), "end": (24, U8), "name": (40, I8)},
    MEMSET: {"kind": (0, I4), "start": (8, U8), "end": (16, U8), "stream_id": (28, U4)},
    MEMCPY: {"kind": (0, I4), "stream_id": (6, U4), "start": (12, U8), "end": (20, U8)},  # unaligned: byte gather
}
NAMES = {0x7F0000001000: PREPARE_KERNEL, 0x7F0000002000: "sgemm_naive", 0x7F0000003000: MARK_KERNEL}
PREPARE, NAIVE, MARK = NAMES


def build(records: list[dict], align: int = 8) -> tuple[np.ndarray, list[int]]:
    """A buffer holding ``records`` ({field: value}, kind included) one after another, at ``align``-byte offsets."""
    offsets, end = [], 0
    for record in records:
        offsets.append(end)
        end += -(-SIZES[record["kind"]] // align) * align
    buf = np.full(end, 0xAB, dtype=np.uint8)  # garbage between the fields
    for offset, record in zip(offsets, records):
        layout = LAYOUTS.get(record["kind"], {"kind": (0, I4)})
        for field, value in record.items():
            at, dtype = layout[field]
            buf[offset + at : offset + at + dtype.itemsize] = np.array([value], dtype=dtype).view(np.uint8)
    return buf, offsets


def kernel(stream: int, start: int, end: int, name: int) -> dict:
    return {"kind": CONCURRENT_KERNEL, "stream_id": stream, "start": start, "end": end, "name": name}


def work(kind: int, stream: int, start: int, end: int) -> dict:
    return {"kind": kind, "stream_id": stream, "start": start, "end": end}


class Reader:
    """A name reader that counts its calls."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    def __call__(self, pointer: int) -> str:
        self.calls.append(pointer)
        return NAMES[pointer]


BIG = 1_700_000_000_123_456_789  # CUPTI's timestamps are ns since the epoch: past 2**53, exact as ints
BATCH = [
    kernel(7, BIG + 100, BIG + 110, PREPARE),
    kernel(7, BIG + 120, BIG + 150, NAIVE),
    {"kind": OTHER_KIND},
    kernel(7, BIG + 160, BIG + 170, PREPARE),
    work(MEMSET, 7, BIG + 175, BIG + 180),
    kernel(7, BIG + 182, BIG + 200, NAIVE),
    work(MEMCPY, 9, BIG + 150, BIG + 400),  # another stream's copy
    kernel(7, BIG + 210, BIG + 220, PREPARE),
    kernel(7, BIG + 230, BIG + 240, MARK),
]


def test_rows_hold_each_collected_record_in_buffer_order():
    buf, offsets = build(BATCH)
    reader = Reader()
    rows = parse_records(buf, offsets, LAYOUTS, reader)
    assert rows == [
        (CONCURRENT_KERNEL, 7, BIG + 100, BIG + 110, PREPARE_KERNEL),
        (CONCURRENT_KERNEL, 7, BIG + 120, BIG + 150, "sgemm_naive"),
        (CONCURRENT_KERNEL, 7, BIG + 160, BIG + 170, PREPARE_KERNEL),
        (MEMSET, 7, BIG + 175, BIG + 180, ""),
        (CONCURRENT_KERNEL, 7, BIG + 182, BIG + 200, "sgemm_naive"),
        (MEMCPY, 9, BIG + 150, BIG + 400, ""),
        (CONCURRENT_KERNEL, 7, BIG + 210, BIG + 220, PREPARE_KERNEL),
        (CONCURRENT_KERNEL, 7, BIG + 230, BIG + 240, MARK_KERNEL),
    ]
    assert all(type(value) is int for row in rows for value in row[:4])
    # each distinct name pointer is read once, whatever the number of its records
    assert sorted(reader.calls) == [PREPARE, NAIVE, MARK]
    # bytes parse the same as an array
    assert parse_records(buf.tobytes(), offsets, LAYOUTS, NAMES.__getitem__) == rows


def test_the_rows_give_the_batchs_spans_through_the_clocks_hook():
    buf, offsets = build(BATCH)
    clock = CuptiClock.__new__(CuptiClock)  # no CUPTI: only the hook that turns rows into work
    clock._work = []
    clock._completed(parse_records(buf, offsets, LAYOUTS, NAMES.__getitem__))
    assert clock._work[:3] == [(7, BIG + 100, BIG + 110, 1), (7, BIG + 120, BIG + 150, 0), (7, BIG + 160, BIG + 170, 1)]
    assert build_spans(clock._work) == [Span(30, BIG + 120, BIG + 150, 1), Span(23, BIG + 175, BIG + 200, 2), None]


def test_kinds_not_in_the_layouts_are_left_out_and_a_null_name_is_empty():
    buf, offsets = build(
        [kernel(3, 10, 20, 0), work(MEMSET, 3, 30, 40), {"kind": OTHER_KIND}, kernel(3, 50, 60, NAIVE)]
    )
    reader = Reader()
    only_memsets = {MEMSET: LAYOUTS[MEMSET]}
    assert parse_records(buf, offsets, only_memsets, reader) == [(MEMSET, 3, 30, 40, "")]
    assert reader.calls == []
    assert parse_records(buf, offsets, LAYOUTS, reader) == [
        (CONCURRENT_KERNEL, 3, 10, 20, ""),  # a null pointer is not read
        (MEMSET, 3, 30, 40, ""),
        (CONCURRENT_KERNEL, 3, 50, 60, "sgemm_naive"),
    ]
    assert reader.calls == [NAIVE]
    assert parse_records(buf, [], LAYOUTS, reader) == []
    assert parse_records(buf, [offsets[2]], LAYOUTS, reader) == []


def test_records_at_any_offsets_and_a_field_past_the_buffer():
    records = [work(MEMCPY, 1, 5, 6), kernel(2, 7, 8, NAIVE), work(MEMSET, 4, 9, 10)]
    buf, offsets = build(records, align=4)  # fields off their natural alignment: gathered byte by byte
    assert offsets == [0, 48, 112]
    assert parse_records(buf, offsets, LAYOUTS, NAMES.__getitem__) == [
        (MEMCPY, 1, 5, 6, ""),
        (CONCURRENT_KERNEL, 2, 7, 8, "sgemm_naive"),
        (MEMSET, 4, 9, 10, ""),
    ]
    with pytest.raises(CuptiError, match="past the buffer"):
        parse_records(buf[:140], offsets, LAYOUTS, NAMES.__getitem__)


def struct(fields: dict[str, tuple[np.dtype, int]], itemsize: int) -> np.dtype:
    names = list(fields)
    return np.dtype(
        {
            "names": names,
            "formats": [fields[n][0] for n in names],
            "offsets": [fields[n][1] for n in names],
            "itemsize": itemsize,
        }
    )


def test_layouts_come_from_the_newest_struct_dtypes_cupti_python_exports():
    common = {"kind": (I4, 0), "start": (U8, 16), "end": (U8, 24)}
    module = SimpleNamespace(
        activity_kernel9_dtype=struct({**common, "stream_id": (U4, 44), "name": (I8, 96)}, 208),
        activity_kernel10_dtype=struct({**common, "stream_id": (U4, 48), "name": (I8, 104)}, 216),
        activity_cdp_kernel_dtype=struct({**common, "stream_id": (U4, 52), "name": (I8, 112)}, 160),
        activity_memset4_dtype=struct({**common, "stream_id": (U4, 40)}, 88),
        activity_memcpy6_dtype=struct({**common, "stream_id": (U4, 40)}, 96),
        activity_memcpy_pto_p4_dtype=struct({**common, "stream_id": (U4, 44)}, 96),
    )
    layouts = layouts_from(module)
    assert {kind: {f: at for f, (at, _) in fields.items()} for kind, fields in layouts.items()} == {
        CONCURRENT_KERNEL: {"kind": 0, "start": 16, "end": 24, "stream_id": 48, "name": 104},
        MEMSET: {"kind": 0, "start": 16, "end": 24, "stream_id": 40},
        MEMCPY: {"kind": 0, "start": 16, "end": 24, "stream_id": 40},
    }
    assert layouts[CONCURRENT_KERNEL]["start"][1] == U8
    del module.activity_memcpy6_dtype
    with pytest.raises(CuptiError, match="activity_memcpy<version>_dtype"):
        layouts_from(module)
    module.activity_memcpy6_dtype = struct({"kind": (I4, 4), "start": (U8, 16), "end": (U8, 24)}, 32)
    with pytest.raises(CuptiError, match="no field stream_id"):
        layouts_from(module)


def test_the_loaded_libcupti_is_found_in_the_maps(tmp_path):
    maps = tmp_path / "maps"
    line = "7f0000000000-7f0000100000 r-xp 00000000 08:01 1234   {}\n"
    maps.write_text(line.format("/usr/lib/libcuda.so.1") + line.format("/x/libcupti_stub.so"))
    loads = []
    with pytest.raises(CuptiError, match="no libcupti"):
        libcupti_path(lambda: loads.append(1), str(maps))
    assert loads == [1]  # asked cupti-python to load it, once

    def load() -> None:
        maps.write_text(maps.read_text() + line.format("/opt/my lib/nvidia/cu13/lib/libcupti.so.13"))

    assert libcupti_path(load, str(maps)) == "/opt/my lib/nvidia/cu13/lib/libcupti.so.13"

    def fail() -> None:
        raise OSError("CUDA driver is not found")

    assert libcupti_path(fail, str(maps)) == "/opt/my lib/nvidia/cu13/lib/libcupti.so.13"  # loaded already
    maps.write_text(line.format("/usr/lib/libcuda.so.1"))
    with pytest.raises(CuptiError, match=r"no libcupti.*: OSError: CUDA driver is not found"):
        libcupti_path(fail, str(maps))


def test_a_c_string_is_read_at_its_address():
    text = ctypes.create_string_buffer(b"_Z11sgemm_naiveiiifPKfS0_fPf")
    assert read_c_string(ctypes.addressof(text)) == "_Z11sgemm_naiveiiifPKfS0_fPf"


class Function:
    """A stand-in for a ctypes function: callable, and takes argtypes and restype."""

    def __init__(self, function) -> None:
        self.function = function

    def __call__(self, *args):
        return self.function(*args)


class FakeLibcupti:
    """libcupti's activity API in Python, records from ``pending`` written into the buffers it is handed."""

    def __init__(self) -> None:
        self.pending: list[dict] = []
        self.enabled: set[int] = set()
        self.errors = {"cuptiActivityEnable": 0}
        for name in dir(self):
            if name.startswith("cupti"):
                setattr(self, name, Function(getattr(self, name)))

    def __getitem__(self, name: str) -> Function:  # ctypes.CDLL's lookup by name: a new function object
        return Function(getattr(self, name).function)

    def cuptiActivityRegisterCallbacks(self, requested, completed) -> int:
        self.requested, self.completed = requested, completed
        return 0

    def cuptiActivityEnable(self, kind: int) -> int:
        self.enabled.add(kind)
        return self.errors["cuptiActivityEnable"]

    def cuptiActivityDisable(self, kind: int) -> int:
        self.enabled.discard(kind)
        return 0

    def cuptiGetResultString(self, result: int, text) -> int:
        text._obj.value = b"CUPTI_ERROR_INVALID_KIND" if result == 21 else None
        return 0 if result == 21 else 1

    def cuptiActivityFlushAll(self, flag: int) -> int:
        assert flag == 1
        buffer, size, most = ctypes.c_void_p(), ctypes.c_size_t(), ctypes.c_size_t(99)
        self.requested(ctypes.pointer(buffer), ctypes.pointer(size), ctypes.pointer(most))
        assert buffer.value % 8 == 0 and size.value == 4096 and most.value == 0
        data, self.sizes = build(self.pending)
        self.pending = []
        ctypes.memmove(buffer.value, data.ctypes.data, data.size)
        self.completed(None, 0, buffer.value, size.value, data.size)
        return 0

    def cuptiActivityGetNextRecord(self, buffer, valid, record) -> int:
        record = record._obj
        at = 0 if record.value is None else record.value - buffer.value
        if record.value is not None:
            kind = ctypes.c_int32.from_address(record.value).value
            at += -(-SIZES[kind] // 8) * 8
        if at >= valid.value:
            return 12  # CUPTI_ERROR_MAX_LIMIT_REACHED
        record.value = buffer.value + at
        return 0


def test_activity_buffers_hand_cuptis_buffers_rows_and_errors():
    strings = [ctypes.create_string_buffer(b"k_a"), ctypes.create_string_buffer(b"k_b")]  # alive to the end
    a, b = (ctypes.addressof(string) for string in strings)
    lib = FakeLibcupti()
    buffers = ActivityBuffers(lib, LAYOUTS, 4096)  # type: ignore[arg-type]
    got: list[list] = []
    buffers.sink = got.append
    buffers.enable([CONCURRENT_KERNEL, MEMSET])
    assert lib.enabled == {CONCURRENT_KERNEL, MEMSET}
    lib.pending = [kernel(1, 2, 3, a), {"kind": OTHER_KIND}, work(MEMSET, 1, 4, 5), kernel(1, 6, 7, b)]
    buffers.flush()
    assert got == [[(CONCURRENT_KERNEL, 1, 2, 3, "k_a"), (MEMSET, 1, 4, 5, ""), (CONCURRENT_KERNEL, 1, 6, 7, "k_b")]]
    assert not buffers._owned and len(buffers._free) == 1  # handed back, kept for CUPTI's next request
    buffers.raise_error()

    def broken(rows: list) -> None:
        raise ValueError("a broken sink")

    buffers.sink = broken
    lib.pending = [kernel(1, 2, 3, a)]
    buffers.flush()  # the callback cannot raise into CUPTI: the error waits for raise_error
    with pytest.raises(CuptiError, match="ValueError: a broken sink"):
        buffers.raise_error()
    buffers.raise_error()  # raised once
    lib.errors["cuptiActivityEnable"] = 21
    with pytest.raises(CuptiError, match=r"cuptiActivityEnable\(2\): CUPTI_ERROR_INVALID_KIND \(CUptiResult 21\)"):
        buffers.enable([MEMSET])
    lib.errors["cuptiActivityEnable"] = 7
    with pytest.raises(CuptiError, match=r"cuptiActivityEnable\(2\): CUptiResult 7$"):
        buffers.enable([MEMSET])


def test_the_kinds_agree_with_cupti_pythons():
    cupti_records.check_kinds(SimpleNamespace(CONCURRENT_KERNEL=10, MEMSET=2, MEMCPY=1))
    with pytest.raises(CuptiError, match="ActivityKind"):
        cupti_records.check_kinds(SimpleNamespace(CONCURRENT_KERNEL=10, MEMSET=1, MEMCPY=2))


def test_two_copies_of_libcupti_are_refused(tmp_path):
    maps = tmp_path / "maps"
    line = "7f0000000000-7f0000100000 r-xp 00000000 08:01 1234   {}\n"
    first, second = "/site/nvidia/cu13/lib/libcupti.so.13", "/opt/torch/lib/libcupti.so.12"
    maps.write_text(line.format(first) * 2 + line.format(second))
    with pytest.raises(CuptiError, match=r"2 copies of libcupti are loaded \(/site/.*\.so\.13, /opt/.*\.so\.12\)"):
        libcupti_path(lambda: None, str(maps))


@pytest.fixture
def fake_cupti(monkeypatch):
    """CuptiClock on FakeLibcupti: a stand-in ``cupti`` module to import, and the process's ActivityBuffers."""
    import sys
    import types

    from pytest_gemm.worker import cupti_clock

    module = types.ModuleType("cupti")
    module.cupti = SimpleNamespace()  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cupti", module)
    lib = FakeLibcupti()
    buffers = ActivityBuffers(lib, LAYOUTS, 4096)  # type: ignore[arg-type]
    monkeypatch.setattr(cupti_clock, "activity_buffers", lambda cupti, size: buffers)
    return lib, buffers


def test_a_clock_collects_one_batch_between_start_and_spans(fake_cupti):
    lib, _ = fake_cupti
    clock = CuptiClock()
    assert lib.enabled == set()  # the probe batch of __init__ left nothing enabled
    clock.start()
    assert lib.enabled == {CONCURRENT_KERNEL, MEMSET, MEMCPY}
    strings = {p: ctypes.create_string_buffer(n.encode()) for p, n in NAMES.items()}
    lib.pending = [
        {**r, "name": ctypes.addressof(strings[r["name"]])} if r["kind"] == CONCURRENT_KERNEL else r for r in BATCH
    ]
    assert clock.spans() == [Span(30, BIG + 120, BIG + 150, 1), Span(23, BIG + 175, BIG + 200, 2), None]
    assert lib.enabled == set()
    # a second clock started later gets the records; the first one's work is its own
    other = CuptiClock()
    other.start()
    lib.pending = [kernel(7, 1, 2, ctypes.addressof(strings[PREPARE])), work(MEMSET, 7, 3, 5)]
    assert other.spans() == [Span(2, 3, 5, 1)]
    assert len(clock._work) == len(BATCH) - 1  # every record but the uncollected kind


def test_a_failed_flush_still_stops_collecting_and_abandon_forgets(fake_cupti):
    lib, _ = fake_cupti
    clock = CuptiClock()
    clock.start()

    def broken_flush(flag: int) -> int:
        return 7

    flush = lib.cuptiActivityFlushAll
    lib.cuptiActivityFlushAll = Function(broken_flush)
    with pytest.raises(CuptiError, match="cuptiActivityFlushAll: CUptiResult 7"):
        clock.spans()
    assert lib.enabled == set()
    lib.cuptiActivityFlushAll = flush
    clock.start()
    lib.pending = [kernel(7, 1, 2, 0)]
    clock.abandon()
    assert lib.enabled == set() and clock._work == []


def test_an_invalid_record_fails_the_batch_instead_of_dropping_its_end(fake_cupti):
    lib, buffers = fake_cupti
    clock = CuptiClock()
    clock.start()
    step = lib.cuptiActivityGetNextRecord.function
    calls = []

    def invalid_third(buffer, valid, record) -> int:
        calls.append(1)
        return 21 if len(calls) == 3 else step(buffer, valid, record)

    lib.cuptiActivityGetNextRecord = Function(invalid_third)  # what _walk calls: lib[name]
    buffers._step = Function(invalid_third)
    lib.pending = [kernel(7, 1, 2, 0), work(MEMSET, 7, 3, 5), work(MEMSET, 7, 6, 8)]
    with pytest.raises(CuptiError, match=r"incomplete or invalid record after 2 record\(s\)"):
        clock.spans()
    assert lib.enabled == set()


def test_the_real_cupti_python_has_the_kinds_and_layouts_used():
    """Where cupti-python is installed (the GPU machine): its enum values and record dtypes are the ones read."""
    cupti = pytest.importorskip("cupti.cupti", reason="cupti-python is not installed")
    cupti_records.check_kinds(cupti.ActivityKind)
    layouts = layouts_from(cupti)
    assert {kind: layouts[kind]["start"][0] for kind in layouts} == {CONCURRENT_KERNEL: 16, MEMSET: 16, MEMCPY: 16}
    assert layouts[CONCURRENT_KERNEL]["name"][1].itemsize == 8
