"""Device buffers: matrices at the centre of guarded buffers, where writes past them landed, and bit conversions."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..judge.accuracy import to_host
from ..judge.scaled import fp8_table
from ..records.dtypes import DType
from ..records.outcome import Fault
from ..records.verdicts import Check
from ..specs.footprint import GuardLayout, guard_layout

__all__ = [
    "GuardedMatrix",
    "bits_to_float64",
    "guarded",
    "guarded_buffer",
    "np_dtype",
    "random_matrix",
    "transposed_each",
    "uint_type",
    "upload_bits",
    "where_landed",
]


@dataclass
class GuardedMatrix:
    """A matrix stored at the centre of a larger buffer whose rest holds a NaN bit pattern; or a strided batch of
    ``batch`` matrices, one every ``stride`` elements, the rows between them guarded too."""

    flat: Any  # unsigned-integer view of the whole buffer
    start: int
    rows: int
    cols: int
    ld: int
    guard_bits: int
    batch: int = 1
    stride: int = 0  # elements from one matrix of the batch to the next (a multiple of ld); 0: rows * ld

    @property
    def batch_stride(self) -> int:
        """The stride the kernel is given: elements from one matrix of the batch to the next."""
        return self.stride or self.rows * self.ld

    @property
    def end(self) -> int:
        """Where the last matrix of the batch ends (its last row's ld included)."""
        return self.start + (self.batch - 1) * self.batch_stride + self.rows * self.ld

    def _batched(self, storage: Any, rows: int | None = None) -> Any:
        """The batch as batch x ``rows`` x ld from each matrix's start (a view): its rows (by default), or up to
        the stride's (the matrix, then the guarded rows up to the next), which only the matrices before the last
        have: nothing is allocated past the last matrix's guard (none, under compute-sanitizer)."""
        region = self.flat[self.start :].view(storage)
        size = region.itemsize
        strides = (self.batch_stride * size, self.ld * size, size)
        shape = (self.batch, self.rows if rows is None else rows, self.ld)
        return _module(region).lib.stride_tricks.as_strided(region, shape, strides)

    def matrix(self, storage: Any) -> Any:
        """The rows x cols matrix (a strided view when ld > cols), in its element type; for a batch, the batch x rows x
        cols view of its matrices."""
        if self.batch > 1:
            return self._batched(storage)[:, :, : self.cols]
        region = self.flat[self.start : self.start + self.rows * self.ld].view(storage)
        return region.reshape(self.rows, self.ld)[:, : self.cols]

    def pointer(self) -> Any:
        """The buffer from the matrix's first element on, to pass as a kernel argument."""
        return self.flat[self.start :]

    def as_float64(self, xp: Any, dt: DType) -> Any:
        return bits_to_float64(xp, self.matrix(uint_type(xp, dt.itemsize)), dt)

    def regions(self, name: str) -> dict[str, Any]:
        """The guarded memory around the matrix, by region name ("the guard after A"); views into ``flat``."""
        found = {f"the guard before {name}": self.flat[: self.start], f"the guard after {name}": self.flat[self.end :]}
        if self.ld > self.cols:
            found[f"the row padding of {name}"] = self._rows()[..., self.cols :]
        if self._gaps:
            found[f"the gaps between the batches of {name}"] = self._gap_rows()
        return found

    @property
    def _gaps(self) -> bool:
        """Whether guarded rows lie between the matrices of the batch."""
        return self.batch > 1 and self.batch_stride > self.rows * self.ld

    def _gap_rows(self) -> Any:
        """The guarded rows after each matrix but the last: (batch - 1) x gap rows x ld, in the buffer's type."""
        return self._batched(self.flat.dtype, self.batch_stride // self.ld)[:-1, self.rows :]

    def _rows(self) -> Any:
        """The matrix's rows with their padding, rows x ld in the buffer's element type; a batch's, batch x rows x
        ld."""
        if self.batch > 1:
            return self._batched(self.flat.dtype)
        return self.flat[self.start : self.end].reshape(self.rows, self.ld)

    def stray_writes(self, xp: Any) -> np.ndarray:
        """Where the guard around the matrix was written: (batch, row, column) in storage order, as if each matrix's
        rows and ld went on past its ends (rows < 0 before the first matrix, >= ``rows`` after the last and in the
        gap after each of the others, columns >= ``cols`` in the row padding of any). Only the guard is looked at,
        not the matrix, and on the host (see :meth:`guard_faults`). An (n, 3) host array of int64."""
        last = self.batch - 1
        found = []
        for batch, offset, region in (
            (0, -self.start, self.flat[: self.start]),
            (last, self.rows * self.ld, self.flat[self.end :]),
        ):
            p = np.nonzero(to_host(region) != self.guard_bits)[0].astype(np.int64) + offset
            found.append(np.stack([np.full_like(p, batch), p // self.ld, p % self.ld], axis=1))
        if self.ld > self.cols:
            padding = to_host(self._rows()[..., self.cols :]).reshape(-1, self.rows, self.ld - self.cols)
            batch, row, col = (x.astype(np.int64) for x in np.nonzero(padding != self.guard_bits))
            found.append(np.stack([batch, row, col + self.cols], axis=1))
        if self._gaps:
            batch, row, col = (x.astype(np.int64) for x in np.nonzero(to_host(self._gap_rows()) != self.guard_bits))
            found.append(np.stack([batch, row + self.rows, col], axis=1))
        return np.concatenate(found)

    def outside(self, strays: np.ndarray, transposed: bool) -> np.ndarray:
        """:meth:`stray_writes` in logical rows and columns of the stacked C (a batch's matrices one below the other;
        ``transposed``: stored in its second order), for the error map: (n, 2). Writes into the gaps between matrices
        are left out: stacked, they would fall on the next matrix (the fault names them)."""
        batch, row, col = strays[:, 0], strays[:, 1], strays[:, 2]
        keep = ~((batch < self.batch - 1) & (row >= self.rows))
        batch, row, col = batch[keep], row[keep], col[keep]
        if transposed:
            row, col = col, row
        return np.stack([batch * (self.cols if transposed else self.rows) + row, col], axis=1)

    def guard_faults(self, xp: Any, name: str) -> list[Fault]:
        """The writes into the guard, per region. Each region is compared on the host, where it costs no CuPy
        kernel (on the GPU a comparison and a count per width and shape of region, each JIT-compiled on a fresh
        machine). The guards are 64 KiB before the matrix, 16 elements a row, and after it 64 KiB or its next
        256 rows if more: 8 MB for an 8192-wide fp32 matrix (docs/measurements.md#the-guards); a batch's gaps
        are :data:`~pytest_gemm.specs.footprint.BATCH_GAP_ROWS` rows."""
        faults = []
        for where, region in self.regions(name).items():
            changed_at = to_host(region) != self.guard_bits
            changed = int(np.count_nonzero(changed_at)) if region.size else 0
            if changed:
                if where.startswith("the row padding"):
                    where += " (between the row's end and ld)"
                if where.startswith("the gaps"):
                    where = _gaps_written(np.nonzero(changed_at.reshape(len(changed_at), -1).any(axis=1))[0], name)
                faults.append(Fault(Check.OUT_OF_BOUNDS, where, changed))
        return faults


def transposed_each(x: Any, batch: int) -> Any:
    """Each of a batch's stacked matrices (``x``: batch x rows x cols, stacked) transposed, stacked again in a
    contiguous array of the same module (NumPy or CuPy): a matrix stored in its other order."""
    rows = x.shape[0] // batch
    return x.reshape(batch, rows, -1).swapaxes(1, 2).copy().reshape(-1, rows)


def _module(array: Any) -> Any:
    """The array module of ``array`` (NumPy or CuPy), for what the arrays themselves lack (``as_strided``)."""
    return importlib.import_module(type(array).__module__.split(".")[0])


def _gaps_written(batches: np.ndarray, name: str) -> str:
    """Which gaps between a batch's matrices were written: "the gap after batch 0 of C" (and how many more)."""
    more = f", and after {len(batches) - 1} more of its batches" if len(batches) > 1 else ""
    return f"the gap after batch {int(batches[0])} of {name} (between its rows and the next batch's){more}"


def where_landed(faults: list[Fault], strays: np.ndarray, rows: int, cols: int, col: bool) -> list[Fault]:
    """``faults`` of one matrix's guard, each saying where its writes landed in logical rows and columns, as if
    the matrix went on; ``strays`` is :meth:`GuardedMatrix.stray_writes` (batch, row, column in storage order),
    ``col`` whether the matrix is stored column-major."""
    return [Fault(f.kind, f.where + _landed(strays, f.where, rows, cols, col), f.count) for f in faults]


def _landed(strays: np.ndarray, where: str, rows: int, cols: int, col: bool) -> str:
    """Where the writes into one guard region landed, in logical rows and columns of the matrix."""
    batch, row, column = strays[:, 0], strays[:, 1], strays[:, 2]
    if where.startswith("the gap"):  # between a batch's matrices: the batch it follows says where
        return ""
    if "before" in where:
        mine = strays[row < 0]
    elif "after" in where:  # past the last matrix (the gaps after the others are theirs)
        mine = strays[(row >= rows) & (batch == batch.max())]
    else:
        mine = strays[(row >= 0) & (row < rows) & (column >= cols)]
    mine = mine[:, 1:]
    if not len(mine):
        return ""
    if col:
        mine = mine[:, ::-1]
    (r0, c0), (r1, c1) = mine.min(axis=0).tolist(), mine.max(axis=0).tolist()
    span = lambda a, b: f"{a}" if a == b else f"{a} to {b}"  # noqa: E731
    return f"; as if the matrix went on, at rows {span(r0, r1)}, columns {span(c0, c1)}"


def guarded(
    xp: Any,
    dt: DType,
    padded: bool,
    shape: tuple[int, int],
    fill: np.ndarray | None,
    *,
    guards: bool = True,
    batch: int = 1,
    gap: bool = False,
    ld: int | None = None,
) -> GuardedMatrix:
    """A guarded rows x cols buffer (storage order) holding ``fill``, or the NaN poison when it is None; for a
    ``batch``, that many, ``fill`` their rows one batch after the other, and ``gap``: guarded rows between them.

    Without ``guards`` the buffer is the matrix alone (with its ld padding), so that under compute-sanitizer
    an access past it reaches memory that is not allocated."""
    layout = guard_layout(shape[1], dt.itemsize, padded, guards, rows=shape[0], batch=batch, gap=gap, ld=ld)
    return guarded_buffer(xp, dt, layout, shape, fill, guards=guards)


def guarded_buffer(
    xp: Any, dt: DType, layout: GuardLayout, shape: tuple[int, int], fill: np.ndarray | None, *, guards: bool = True
) -> GuardedMatrix:
    """A buffer of ``layout`` (specs.footprint) for a rows x cols matrix, or a batch of them, holding ``fill`` or the
    NaN poison, as :func:`guarded` says."""
    rows, cols = shape
    # Under compute-sanitizer (no guards) the buffer is built on the host and copied over once: its kernel filter
    # leaves CuPy's own fill and copy kernels uninstrumented, so initcheck would take what they wrote for unwritten
    # (every read of a padded matrix was "uninitialized"); a copy from the host it sees.
    build = xp if guards else np
    flat = build.full(layout.elements(rows), dt.guard_bits, dtype=uint_type(build, dt.itemsize))
    g = GuardedMatrix(flat, layout.before, rows, cols, layout.ld, dt.guard_bits, layout.batch, layout.stride)
    view = g.matrix(flat.dtype)
    if fill is None:
        view[...] = dt.poison_bits
    elif guards:
        view[...] = upload_bits(xp, fill).reshape(view.shape)
    else:
        view[...] = np.ascontiguousarray(fill).view(flat.dtype).reshape(view.shape)
    if not guards:
        g.flat = xp.asarray(flat)
    return g


def np_dtype(dt: DType) -> np.dtype:
    """The host type of ``dt``'s elements (bf16 and FP8 from ml_dtypes; CuPy has none of them, so the device holds
    their bits)."""
    if dt.as_bits:
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, dt.storage))
    return np.dtype(dt.storage)


def _bf16_bits_to(xp: Any, bits: Any, dtype: Any) -> Any:
    """bf16 bit patterns (uint16) to ``dtype``: a bf16 is the top half of an fp32."""
    return (bits.astype(xp.uint32) << 16).view(xp.float32).astype(dtype)


def upload_bits(cp: Any, host: np.ndarray) -> Any:
    """Copy a host array to the device as its raw bits (works for bf16, which CuPy may not know)."""
    return cp.asarray(np.ascontiguousarray(host).view(f"u{host.dtype.itemsize}"))


def bits_to_float64(xp: Any, bits: Any, dt: DType) -> Any:
    if dt.name == "bf16":
        return _bf16_bits_to(xp, bits, xp.float64)
    if dt.by_table:  # each byte's value from the format's table (no CuPy type for it)
        return xp.asarray(fp8_table(dt.name))[bits]
    contiguous = bits if bits.flags.c_contiguous else xp.ascontiguousarray(bits)
    return contiguous.view(np_dtype(dt)).astype(xp.float64)


def uint_type(xp: Any, itemsize: int) -> Any:
    return {1: xp.uint8, 2: xp.uint16, 4: xp.uint32, 8: xp.uint64}[itemsize]


def random_matrix(rng: np.random.Generator, shape: tuple[int, int], storage: np.dtype) -> np.ndarray:
    """Zero-mean data in [-1, 1), stored exactly in the kernel's element type.

    Drawn in single precision unless the storage is double: faster than drawing doubles and converting
    (docs/measurements.md#drawing-the-inputs)."""
    work = np.float64 if storage == np.float64 else np.float32
    x = rng.random(shape, dtype=work)
    x *= 2
    x -= 1
    return x.astype(storage, copy=False)
