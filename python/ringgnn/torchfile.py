"""PyTorch's ``.pt`` files (``torch.save``'s zip format) read without PyTorch: the tensors come
back as numpy arrays (issue 24).

Layer-wise inference on the CPU never needs PyTorch: the aggregation is the Rust core's and the
dense parts are numpy's (``ringgnn.infer_dense``). Importing PyTorch and PyG alone holds 435 MiB
of anonymous memory (torch 2.15's CUDA build), more than a 400M budget; reading a run's
checkpoint is the one thing that would import it, so it is read here.

The format: a zip archive ``NAME/data.pkl`` (a pickle, protocol 2) with one entry
``NAME/data/KEY`` per storage, raw little-endian bytes (``NAME/byteorder``). A tensor is pickled as
``torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks)``, its
storage a persistent id ``("storage", torch.FloatStorage, KEY, location, numel)``. The unpickler is
restricted as ``torch.load(weights_only=True)`` is: containers, numbers, strings, ``OrderedDict``,
tensors and storages of the listed dtypes; anything else (a class, a function) is refused, so a
checkpoint cannot run code."""

from __future__ import annotations

import collections
import io
import pickle
import zipfile
from typing import Any, Dict, Tuple

import numpy as np

from ._core import InputError
from ._files import os_errors

#: Storage classes (``torch.FloatStorage``...) and the numpy dtype of their elements. bf16 has
#: no numpy dtype: its 16 bits come back as uint16 (a model of ringgnn's is float32).
STORAGES: Dict[str, np.dtype] = {
    "FloatStorage": np.dtype("<f4"), "DoubleStorage": np.dtype("<f8"), "HalfStorage": np.dtype("<f2"),
    "BFloat16Storage": np.dtype("<u2"), "LongStorage": np.dtype("<i8"), "IntStorage": np.dtype("<i4"),
    "ShortStorage": np.dtype("<i2"), "CharStorage": np.dtype("i1"), "ByteStorage": np.dtype("u1"),
    "BoolStorage": np.dtype("?"),
}


class _StorageType:
    """What ``torch.FloatStorage`` and its kind unpickle to: the dtype of its elements."""

    def __init__(self, name: str):
        self.name, self.dtype = name, STORAGES[name]


def _rebuild_tensor(storage: np.ndarray, offset: int, size: Tuple[int, ...], stride: Tuple[int, ...],
                    *_: Any) -> np.ndarray:
    """A tensor's elements as a numpy array of its own (``size`` and element ``stride`` over the
    storage's elements from ``offset``)."""
    if not size:
        return storage[offset:offset + 1].reshape(()).copy()
    if any(s == 0 for s in size):
        return np.empty(size, dtype=storage.dtype)
    last = offset + sum((n - 1) * s for n, s in zip(size, stride))
    if offset < 0 or any(s < 0 for s in stride) or last >= len(storage):
        raise ValueError(f"a tensor of size {tuple(size)} and stride {tuple(stride)} at {offset} is outside its "
                         f"storage of {len(storage)} elements")
    item = storage.dtype.itemsize
    view = np.lib.stride_tricks.as_strided(storage[offset:], shape=tuple(size),
                                           strides=tuple(s * item for s in stride))
    return np.array(view)  # its own elements: the storage's bytes are not kept alive by a small view


def _rebuild_parameter(data: np.ndarray, *_: Any) -> np.ndarray:
    return data


#: The globals a checkpoint may name, and what they become.
_ALLOWED = {
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
}


class _Unpickler(pickle.Unpickler):
    def __init__(self, data: bytes, archive: zipfile.ZipFile, prefix: str, path: str):
        super().__init__(io.BytesIO(data))
        self.archive, self.prefix, self.path = archive, prefix, path
        self.storages: Dict[str, np.ndarray] = {}

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _ALLOWED:
            return _ALLOWED[(module, name)]
        if module == "torch" and name in STORAGES:
            return _StorageType(name)
        raise pickle.UnpicklingError(f"it names {module}.{name}, which a checkpoint of tensors and plain values "
                                     "does not hold")

    def persistent_load(self, pid: Any) -> np.ndarray:
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"
                and isinstance(pid[1], _StorageType)):
            raise pickle.UnpicklingError(f"an unknown persistent id {pid!r}")
        _, kind, key, _location, numel = pid
        if key not in self.storages:
            raw = self.archive.read(f"{self.prefix}/data/{key}")
            arr = np.frombuffer(raw, dtype=kind.dtype)
            if len(arr) < int(numel):
                raise pickle.UnpicklingError(f"storage {key} holds {len(arr)} elements, not {numel}")
            self.storages[key] = arr
        return self.storages[key]


def load(path: str) -> Any:
    """The object ``torch.save`` wrote to ``path``, its tensors as numpy arrays (bf16 as uint16
    bits). A file that is not a zip-format ``.pt``, or that names anything but tensors and plain
    values, is refused with an :class:`InputError` naming it."""
    with os_errors("reading the checkpoint", path):
        try:
            archive = zipfile.ZipFile(path)
        except zipfile.BadZipFile:
            raise InputError(f"{path}: not a readable checkpoint (not the zip format of torch.save; re-save it "
                             "with torch >= 1.6)") from None
        with archive:
            names = [n for n in archive.namelist() if n.endswith("/data.pkl") and n.count("/") == 1]
            if len(names) != 1:
                raise InputError(f"{path}: not a readable checkpoint (no NAME/data.pkl in the archive)")
            prefix = names[0][: -len("/data.pkl")]
            order = f"{prefix}/byteorder"
            if order in archive.namelist() and archive.read(order).strip() != b"little":
                raise InputError(f"{path}: a big-endian checkpoint; re-save it on a little-endian machine")
            try:
                return _Unpickler(archive.read(names[0]), archive, prefix, path).load()
            except (pickle.UnpicklingError, ValueError, KeyError, EOFError, TypeError, AttributeError) as e:
                raise InputError(f"{path}: not a readable checkpoint ({e})") from None
