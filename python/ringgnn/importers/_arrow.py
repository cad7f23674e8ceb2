"""What the table importers do with Arrow: tables read in record batches and checked
(:class:`Table`), id and time columns as arrays, the bucket of an id and bucket files
(:class:`Buckets`), and numpy <-> Arrow without pyarrow's pandas import."""

from __future__ import annotations

import contextlib
import os
from typing import Any, Dict, Iterator, List, Optional, Sequence

import numpy as np

from .._core import InputError
from .._excerpt import excerpt, quoted, reason
from .._files import os_errors
from ..data.generate import mix64
from ._stage import Staging

BATCH_ROWS = 1 << 18
PARQUET_BUFFER = 1 << 20  # bytes of a Parquet reader's buffered input stream
_K = np.uint64(0x100000001B3)  # FNV prime: the polynomial base of the string hash


@contextlib.contextmanager
def arrow_io(operation: str, path: str) -> Iterator[None]:
    """:func:`ringgnn._files.os_errors` for pyarrow's I/O: pyarrow's ``OSError`` is given the
    system's reason for its errno."""
    with os_errors(operation, path):
        try:
            yield
        except OSError as e:
            if e.errno is None or e.filename is not None or getattr(e, "operation", None) is not None:
                raise
            raise OSError(e.errno, os.strerror(e.errno)).with_traceback(e.__traceback__) from None


def require_pyarrow() -> Any:
    try:
        import pyarrow
    except ImportError:
        raise InputError("reading Parquet and CSV tables needs pyarrow; install it with "
                         "pip install 'ringgnn[parquet]'") from None
    return pyarrow


#: Bytes of string data hashed at once (the temporaries take about 40 bytes per byte).
HASH_BYTES = 1 << 20


def string_hash(arr: Any) -> np.ndarray:
    """A 64-bit hash of each string of an Arrow string array, from its bytes, in slices of
    about :data:`HASH_BYTES`."""
    import pyarrow as pa

    arr = arr.cast(pa.large_string())
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    _, offsets_buf, data_buf = arr.buffers()
    offsets = np.frombuffer(offsets_buf, dtype=np.int64)[arr.offset: arr.offset + len(arr) + 1]
    if len(arr) == 0:
        return np.zeros(0, dtype=np.uint64)
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    out = np.empty(len(arr), dtype=np.uint64)
    a = 0
    while a < len(arr):
        b = max(a + 1, int(np.searchsorted(offsets, offsets[a] + HASH_BYTES, side="right")) - 1)
        b = min(b, len(arr))
        out[a:b] = _hash_slice(offsets[a: b + 1], data)
        a = b
    return out


def _hash_slice(offsets: np.ndarray, all_data: np.ndarray) -> np.ndarray:
    data = all_data[offsets[0]: offsets[-1]]
    lengths = np.diff(offsets)
    starts = offsets[:-1] - offsets[0]
    h = np.zeros(len(lengths), dtype=np.uint64)
    if data.size:
        pos = np.arange(data.size, dtype=np.int64) - np.repeat(starts, lengths)
        powers = np.cumprod(np.full(int(lengths.max()), _K, dtype=np.uint64))
        terms = np.append(data.astype(np.uint64) * powers[pos], np.uint64(0))
        sums = np.add.reduceat(terms, np.minimum(starts, data.size))
        h = np.where(lengths > 0, sums, np.uint64(0))
    return mix64(h ^ lengths.astype(np.uint64))


class Table:
    """A Parquet file or a CSV with a header, read in record batches of chosen columns; the one
    place that checks what a table gives, naming the file, the column and the CSV line or
    Parquet row (from 0). A CSV's ``id_columns`` are read as strings, so that ``007`` and ``7``
    stay different nodes."""

    def __init__(self, path: str, id_columns: Sequence[str] = ()):
        pa = require_pyarrow()
        self.path = path
        self.id_columns = tuple(id_columns)
        self.parquet = path.lower().endswith((".parquet", ".pq"))
        with arrow_io("reading", path):
            if self.parquet:
                import pyarrow.parquet as pq

                try:
                    pf = pq.ParquetFile(path)
                except pa.ArrowInvalid as e:
                    raise InputError(f"{path}: not a Parquet file ({e})") from None  # pyarrow quotes nothing of it
                self.schema = pf.schema_arrow
                self.rows: Optional[int] = pf.metadata.num_rows
                pf.close()
            else:
                self.schema = self._csv().schema
                self.rows = None

    def _csv(self, handler: Any = None, text: Optional[str] = None) -> Any:
        import pyarrow as pa
        import pyarrow.csv as pcsv

        convert = pcsv.ConvertOptions(column_types={c: pa.string() for c in self.id_columns})
        if text is not None:
            convert = pcsv.ConvertOptions(include_columns=[text], column_types={text: pa.string()},
                                          strings_can_be_null=True)
        try:
            return pcsv.open_csv(self.path, read_options=pcsv.ReadOptions(block_size=8 << 20,
                                                                          use_threads=handler is None),
                                 parse_options=pcsv.ParseOptions(invalid_row_handler=handler),
                                 convert_options=convert)
        except pa.ArrowInvalid as e:
            if handler is not None:
                raise
            raise self._csv_error(f"not a CSV file with a header line ({reason(e, quote=True)})") from None

    def _csv_error(self, otherwise: str) -> InputError:
        """pyarrow's error about a CSV line as one naming the line (a reader with threads does
        not know line numbers, so the file is read again without); ``otherwise`` where no line
        has the wrong width."""
        import pyarrow as pa

        bad: List[Any] = []
        try:
            reader = self._csv(lambda row: bad.append(row) or "error")
            while True:
                reader.read_next_batch()
        except StopIteration:
            pass
        except pa.ArrowInvalid:
            if bad and bad[0].number is not None:
                row = bad[0]
                fields = f"{row.actual_columns} field{'s' if row.actual_columns != 1 else ''}"
                return InputError(f"{self.path}: line {row.number} has {fields}, and the header "
                                  f"{row.expected_columns} ({quoted(row.text)}); give every line the "
                                  "header's columns (quote a field that holds a comma)")
        return InputError(f"{self.path}: {otherwise}")

    def field(self, name: str, option: str) -> Any:
        """The schema's field ``name`` (``option``: ``--src``); refused when absent or named twice."""
        names = self.schema.names
        if name not in names:
            raise InputError(f"{self.path}: no column '{name}' ({option}); it has: {', '.join(names)}")
        at = [i + 1 for i, n in enumerate(names) if n == name]
        if len(at) > 1:
            raise InputError(f"{self.path}: the header names {len(at)} columns '{name}' ({option}; columns "
                             f"{', '.join(map(str, at))}); give each column its own name")
        return self.schema.field(name)

    def place(self, row: int) -> str:
        """Data row ``row`` (from 0) as a CSV's line or a Parquet file's row."""
        return f"row {row}" if self.parquet else f"line {row + 2}"

    def ids(self, col: Any, kind: str, name: str, option: str, row0: int) -> Any:
        """Column ``name``'s ids in a batch whose first row is ``row0``; a null or an empty CSV
        field is refused naming its line."""
        import pyarrow.compute as pc

        empty = not self.parquet and kind == "str" and len(col) > 0 and pc.min(pc.binary_length(col)).as_py() == 0
        if col.null_count or empty:
            missing = col.is_null()
            if empty:
                missing = pc.or_kleene(missing, pc.equal(pc.binary_length(col), 0))
            i = int(np.flatnonzero(to_np(missing))[0])
            null = " (null)" if col.is_null()[i].as_py() else ""
            raise InputError(f"{self.path}: column '{name}': {self.place(row0 + i)} is empty{null}; every row needs "
                             f"its id ({option})")
        return ids_of(col, kind)

    def value_type(self, name: str, option: str) -> Any:
        import pyarrow as pa

        t = self.field(name, option).type
        return t.value_type if pa.types.is_dictionary(t) else t

    def column_type(self, name: str, option: str) -> str:
        """'int', 'uint' or 'str' for column ``name``; an error naming it otherwise."""
        import pyarrow as pa

        t = self.value_type(name, option)
        if pa.types.is_signed_integer(t):
            return "int"
        if pa.types.is_unsigned_integer(t):
            return "uint"
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            return "str"
        raise InputError(f"{self.path}: column '{name}' ({option}) holds {t}; node ids must be integers or strings "
                         "(floats would lose ids past 2^53)")

    def time_unit(self, name: str, option: str) -> str:
        """The unit of time column ``name``'s stored values: ``""`` for integers, a timestamp's
        unit, ``days`` for a date32, ``ms`` for a date64; an error naming the column otherwise."""
        import pyarrow as pa

        t = self.value_type(name, option)
        if pa.types.is_integer(t):
            return ""
        if pa.types.is_timestamp(t):
            return t.unit
        if pa.types.is_date32(t):
            return "days"
        if pa.types.is_date64(t):
            return "ms"
        where = self._first_non_time(name) if pa.types.is_floating(t) else ""
        raise InputError(f"{self.path}: column '{name}' ({option}) holds {t}{where}; times must be integers, "
                         "timestamps or dates (store them as int64 in one unit: seconds, days, an event index)")

    def _first_non_time(self, name: str) -> str:
        """Where float column ``name`` first holds a value that is not an int64 integer, as
        `` (line 3 is 5.5)``; ``""`` if none does. A CSV's column is read again as text, to show
        the value as the file has it."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if self.parquet:
            return self.first_float(name, int64=True)
        row0 = 0
        with arrow_io("reading", self.path):
            for b in self._csv(text=name):
                col = pc.utf8_trim_whitespace(b.column(0))
                whole = to_np(pc.fill_null(pc.match_substring_regex(col, r"^[+-]?[0-9]+$"), True))
                # An integer of 19 digits or more may lie past int64.
                long = whole & to_np(pc.fill_null(pc.greater_equal(pc.utf8_length(col), 19), False))
                bad = ~whole
                try:
                    pc.cast(col.filter(pa.array(long)), pa.int64())
                except pa.ArrowInvalid:
                    for i in np.flatnonzero(long):
                        bad[i] = _past_int64(int(col[int(i)].as_py())) != ""
                if bad.any():
                    i = int(np.flatnonzero(bad)[0])
                    text = col[i].as_py()
                    past = _past_int64(int(text)) if whole[i] else ""
                    return f" ({self.place(row0 + i)} is {excerpt(text)}{past})"
                row0 += len(b)
        return ""

    def first_float(self, name: str, int64: bool = False) -> str:
        """Where float column ``name`` first holds a value that is not a whole number (with
        ``int64``: or one outside int64), as `` (row 3 is 5.5)``; ``""`` if none does."""
        row0 = 0
        for b in self.batches([name]):
            col = b.column(0)
            v = to_np(col).astype(np.float64)
            with np.errstate(invalid="ignore"):
                bad = ~np.isfinite(v) | (v != np.floor(v))
                if int64:
                    bad |= (v >= 2.0**63) | (v < -2.0**63)
            if col.null_count:
                bad &= ~to_np(col.is_null())
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                return f" ({self.place(row0 + i)} is {float(v[i])!r}{_past_int64(v[i]) if int64 else ''})"
            row0 += len(b)
        return ""

    def times(self, col: Any, name: str, option: str, row0: int) -> np.ndarray:
        """Time column ``name``'s values in a batch whose first row is ``row0``; a null is refused."""
        if col.null_count:
            i = int(np.flatnonzero(to_np(col.is_null()))[0])
            raise InputError(f"{self.path}: column '{name}' ({option}): {self.place(row0 + i)} has no time (null); "
                             "every row needs its time")
        return times_of(col, lambda i, v: f"{self.path}: column '{name}' ({option}): {self.place(row0 + i)} is {v}")

    def batches(self, columns: List[str]) -> Iterator[Any]:
        """Record batches of ``columns``, in that order (a column named twice is read once)."""
        import pyarrow as pa

        import pyarrow.parquet as pq

        # A reader per pass, closed after it, without pre-buffering: with it `iter_batches` keeps
        # every column chunk read until the reader closes (1.9 GB for a 1.6 GB file).
        with arrow_io("reading", self.path):
            pf = pq.ParquetFile(self.path, pre_buffer=False, buffer_size=PARQUET_BUFFER) if self.parquet else None
            batches = pf.iter_batches(batch_size=BATCH_ROWS, columns=list(dict.fromkeys(columns))) if pf else \
                iter(self._csv())
        with pf or contextlib.nullcontext():
            while True:
                try:
                    with arrow_io("reading", self.path):
                        b = next(batches, None)
                except pa.ArrowInvalid as e:
                    if self.parquet:
                        raise
                    raise self._csv_error(f"{reason(e, quote=True)}; fix that line of the CSV") from None
                if b is None:
                    return
                yield b.select(columns)


def ids_of(col: Any, kind: str) -> Any:
    """A batch column without nulls as numpy int64/uint64 or an Arrow large_string array."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_dictionary(col.type):
        col = pc.cast(col, col.type.value_type)
    if kind == "str":
        return col.cast(pa.large_string())
    if kind == "uint":
        return to_np(col.cast(pa.uint64()))
    return to_np(col.cast(pa.int64()))


def _past_int64(v: Any) -> str:
    if v > 2**63 - 1:
        return ", past the largest time, 2^63 - 1"
    if v < -(2**63):
        return ", before the smallest time, -2^63"
    return ""


def times_of(col: Any, where: Any) -> np.ndarray:
    """A time column without nulls as int64 in its unit; an unsigned value past 2^63 - 1 is
    refused with ``where(i, value)`` naming its place."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_dictionary(col.type):
        col = pc.cast(col, col.type.value_type)
    t = col.type
    if pa.types.is_unsigned_integer(t):
        big = to_np(col.cast(pa.uint64())) > np.uint64(2**63 - 1)
        if big.any():
            i = int(np.flatnonzero(big)[0])
            raise InputError(f"{where(i, col[i].as_py())}, past the largest time (2^63 - 1)")
    elif pa.types.is_date32(t):
        col = col.cast(pa.int32())
    elif not pa.types.is_integer(t):  # timestamp, date64: the stored int64
        col = col.cast(pa.int64())
    return to_np(col.cast(pa.int64())).astype(np.int64, copy=False)


def id_type(kind: str) -> Any:
    import pyarrow as pa

    return pa.large_string() if kind == "str" else (pa.uint64() if kind == "uint" else pa.int64())


def bucket_of(ids: Any, kind: str, p: int) -> np.ndarray:
    h = string_hash(ids) if kind == "str" else mix64(ids.view(np.uint64))
    return (h % np.uint64(p)).astype(np.int64)


def allow_open_files(n: int) -> None:
    """Raise the soft limit on open files so that ``n`` bucket files fit; an error says what to
    do when the hard limit is too low."""
    try:
        import resource
    except ImportError:  # not POSIX
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = n + 256
    if soft == resource.RLIM_INFINITY or soft >= want:
        return
    if hard != resource.RLIM_INFINITY and hard < want:
        raise InputError(f"the import writes {n} bucket files at once, and this process may open {hard} files; raise "
                         f"the limit (ulimit -n {want}) or give a larger --memory (fewer, larger buckets)")
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


class Buckets:
    """``p`` Arrow IPC stream files of one schema, appended to by bucket."""

    def __init__(self, stage: Staging, stem: str, schema: Any, p: int):
        import pyarrow as pa

        self.paths = [stage.path(f"{stem}-{b}")[:-4] + ".arrow" for b in range(p)]
        self.schema, self._pa = schema, pa
        self._writers: Dict[int, Any] = {}

    def write(self, bucket: np.ndarray, columns: List[Any]) -> None:
        pa = self._pa
        # a stable sort of 16-bit keys is a radix sort (bucket < MAX_BUCKETS <= 2^15)
        order = np.argsort(bucket.astype(np.int16), kind="stable")
        bounds = np.searchsorted(bucket[order], np.arange(len(self.paths) + 1))
        cols = [c.take(arrow(order)) if isinstance(c, pa.Array) else c[order] for c in columns]
        for b in np.flatnonzero(np.diff(bounds)):
            lo, hi = bounds[b], bounds[b + 1]
            batch = pa.record_batch([c[lo:hi] if isinstance(c, pa.Array) else arrow(c[lo:hi]) for c in cols],
                                    schema=self.schema)
            with arrow_io("writing", self.paths[b]):
                w = self._writers.get(b)
                if w is None:
                    w = self._writers[b] = pa.ipc.new_stream(self.paths[b], self.schema)
                w.write_batch(batch)

    def close(self) -> None:
        for b, w in self._writers.items():
            with arrow_io("writing", self.paths[b]):
                w.close()
        self._writers.clear()

    def read(self, b: int) -> Any:
        """Bucket ``b`` as one table (empty when nothing went there)."""
        pa = self._pa
        if not os.path.exists(self.paths[b]):
            return self.schema.empty_table()
        with arrow_io("reading", self.paths[b]), pa.memory_map(self.paths[b]) as src:
            return pa.ipc.open_stream(src).read_all()


_FLOATS = {"halffloat": np.float16, "float": np.float32, "double": np.float64}


def to_np(a: Any) -> np.ndarray:
    """A numeric or boolean Arrow array as numpy, sharing its buffer where it can (values at
    nulls unspecified). Not ``to_numpy``: pyarrow imports pandas for it when installed."""
    import pyarrow as pa

    t = a.type
    if isinstance(a, pa.ChunkedArray):
        a = a.chunk(0) if a.num_chunks == 1 else (a.combine_chunks() if a.num_chunks else None)
    if a is not None and pa.types.is_dictionary(t):
        a, t = a.dictionary_decode(), t.value_type
    if a is None or len(a) == 0:
        return np.zeros(0, dtype=bool if pa.types.is_boolean(t) else _FLOATS.get(str(t), str(t)))
    data = a.buffers()[1]
    if pa.types.is_boolean(t):
        bits = np.unpackbits(np.frombuffer(data, np.uint8), bitorder="little")
        return bits[a.offset: a.offset + len(a)].astype(bool)
    dtype = np.dtype(_FLOATS.get(str(t), str(t)))
    return np.frombuffer(data, dtype=dtype)[a.offset: a.offset + len(a)]


def arrow(a: np.ndarray) -> Any:
    """A 1-D numeric numpy array as an Arrow array, sharing its buffer (``pa.array`` would import pandas)."""
    import pyarrow as pa

    a = np.ascontiguousarray(a)
    return pa.Array.from_buffers(pa.from_numpy_dtype(a.dtype), len(a), [None, pa.py_buffer(a)])
