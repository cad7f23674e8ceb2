"""PyTorch's ``.pt`` files (``torch.save``'s zip format) read without PyTorch, tensors
as numpy arrays: importing PyTorch alone holds more than a small inference budget.

The format: a zip with ``NAME/data.pkl`` (pickle protocol 2) and one ``NAME/data/KEY`` per
storage (little-endian bytes). A tensor is pickled as ``torch._utils._rebuild_tensor_v2(storage,
offset, size, stride, ...)``, its storage a persistent id ``("storage", dtype, KEY, location,
numel)``. The unpickler allows what ``torch.load(weights_only=True)`` does; anything else is
refused, so a checkpoint cannot run code. Parts in ``skip`` are dropped before any storage is
read, and each storage is read once, into the buffer its tensor uses."""

from __future__ import annotations

import collections
import io
import os
import pickle
import zipfile
import zlib
from typing import Any, Dict, Tuple

import numpy as np

from .._core import InputError
from .._files import os_errors

#: Storage classes and their elements' numpy dtype (bf16 comes back as uint16 bits).
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


class _Storage:
    """A storage named by the pickle, not read yet: its entry, dtype and element count."""

    def __init__(self, key: str, dtype: np.dtype, numel: int):
        self.key, self.dtype, self.numel = key, dtype, int(numel)


class _Tensor:
    """A tensor of the pickle, not built yet (``_rebuild_tensor_v2``'s arguments)."""

    def __init__(self, storage: _Storage, offset: int, size: Tuple[int, ...], stride: Tuple[int, ...]):
        if not isinstance(storage, _Storage):
            raise pickle.UnpicklingError("a tensor whose storage is not one of the archive's")
        self.storage, self.offset, self.size, self.stride = storage, int(offset), tuple(size), tuple(stride)


def _rebuild_tensor(storage: _Storage, offset: int, size: Tuple[int, ...], stride: Tuple[int, ...],
                    *_: Any) -> _Tensor:
    return _Tensor(storage, offset, size, stride)


def _tensor(t: _Tensor, storage: np.ndarray) -> np.ndarray:
    """A tensor's elements: its storage where it is all of it in order, else a copy."""
    offset, size, stride = t.offset, t.size, t.stride
    if not size:
        if not 0 <= offset < len(storage):
            raise ValueError(f"a scalar at {offset} is outside its storage of {len(storage)} elements")
        return storage[offset:offset + 1].reshape(()).copy()
    if any(s == 0 for s in size):
        return np.empty(size, dtype=storage.dtype)
    last = offset + sum((n - 1) * s for n, s in zip(size, stride))
    if offset < 0 or any(s < 0 for s in stride) or last >= len(storage):
        raise ValueError(f"a tensor of size {size} and stride {stride} at {offset} is outside its "
                         f"storage of {len(storage)} elements")
    contiguous = tuple(int(np.prod(size[i + 1:])) for i in range(len(size)))
    if offset == 0 and last == len(storage) - 1 and all(st == c for n, st, c in zip(size, stride, contiguous) if n > 1):
        return storage.reshape(size)
    item = storage.dtype.itemsize
    view = np.lib.stride_tricks.as_strided(storage[offset:], shape=size, strides=tuple(s * item for s in stride))
    return np.array(view)


def _rebuild_parameter(data: Any, *_: Any) -> Any:
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
        self.storages: Dict[str, _Storage] = {}

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _ALLOWED:
            return _ALLOWED[(module, name)]
        if module == "torch" and name in STORAGES:
            return _StorageType(name)
        raise pickle.UnpicklingError(f"it names {module}.{name}, which a checkpoint of tensors and plain values "
                                     "does not hold")

    def persistent_load(self, pid: Any) -> _Storage:
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"
                and isinstance(pid[1], _StorageType)):
            raise pickle.UnpicklingError(f"an unknown persistent id {pid!r}")
        _, kind, key, _location, numel = pid
        if key not in self.storages:
            self.storages[key] = _Storage(str(key), kind.dtype, numel)
        return self.storages[key]

    def build(self, obj: Any, read: Dict[str, np.ndarray]) -> Any:
        """``obj`` with its tensors built, each storage read once (``read``: those read)."""
        if isinstance(obj, _Tensor):
            st = obj.storage
            if st.key not in read:
                raw = bytearray(self.archive.getinfo(f"{self.prefix}/data/{st.key}").file_size)
                with self.archive.open(f"{self.prefix}/data/{st.key}") as f:
                    f.readinto(raw)  # into a writable buffer: its tensors use it as it is
                arr = np.frombuffer(raw, dtype=st.dtype)
                if len(arr) < st.numel:
                    raise pickle.UnpicklingError(f"storage {st.key} holds {len(arr)} elements, not {st.numel}")
                read[st.key] = arr[:st.numel]
            return _tensor(obj, read[st.key])
        if isinstance(obj, dict):
            built = type(obj)((k, self.build(v, read)) for k, v in obj.items())
            if getattr(obj, "__dict__", None):  # attributes of a dict (PyG's _metadata)
                built.__dict__.update({k: self.build(v, read) for k, v in obj.__dict__.items()})
            return built
        if isinstance(obj, (list, tuple)):
            return type(obj)(self.build(v, read) for v in obj)
        return obj


#: What to do about a checkpoint that cannot be read, where the caller has nothing better to say.
ADVICE = "use an earlier copy of it (a run keeps best.pt and last.pt) or train the run again"

#: How ``torch.save`` began a file before torch 1.6 (not a zip archive).
_LEGACY = b"\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19"


def unreadable(path: str, reason: str = "", advice: str = ADVICE) -> InputError:
    """The error for an unreadable checkpoint ``path``: what the file is (empty, legacy,
    truncated or corrupt) or ``reason``, then ``advice``."""
    try:
        with open(path, "rb") as f:
            head = f.read(len(_LEGACY))
        size = os.path.getsize(path)
        whole = zipfile.is_zipfile(path)
    except OSError:
        head, size, whole = b"", -1, True
    if size == 0:
        what = "the file is empty: a copy or a write that did not finish"
    elif head == _LEGACY:
        return InputError(f"{path}: a checkpoint in torch's format before 1.6; re-save it with torch >= 1.6 "
                          "(torch.save(torch.load(path), path))")
    elif not whole:
        what = f"the file is truncated or corrupt: {size:,} bytes, not a whole archive in torch.save's zip format"
    else:
        what = f"the file is corrupt: {reason}" if reason else "the file is corrupt"
    return InputError(f"{path}: not a readable checkpoint ({what}); {advice}")


def load(path: str, skip: Tuple[str, ...] = (), advice: str = ADVICE) -> Any:
    """The object ``torch.save`` wrote to ``path``, tensors as numpy arrays (bf16 as uint16
    bits), top-level keys in ``skip`` left out unread. Anything else than a zip-format ``.pt`` of
    tensors and plain values is an :class:`InputError` (:func:`unreadable`)."""
    with os_errors("reading the checkpoint", path):
        try:
            archive = zipfile.ZipFile(path)
        except zipfile.BadZipFile:
            raise unreadable(path, advice=advice) from None
        with archive:
            names = [n for n in archive.namelist() if n.endswith("/data.pkl") and n.count("/") == 1]
            if len(names) != 1:
                raise InputError(f"{path}: not a readable checkpoint (no NAME/data.pkl in the archive)")
            prefix = names[0][: -len("/data.pkl")]
            order = f"{prefix}/byteorder"
            if order in archive.namelist() and archive.read(order).strip() != b"little":
                raise InputError(f"{path}: a big-endian checkpoint; re-save it on a little-endian machine")
            try:
                unpickler = _Unpickler(archive.read(names[0]), archive, prefix, path)
                obj = unpickler.load()
                if isinstance(obj, dict) and skip:
                    obj = type(obj)((k, v) for k, v in obj.items() if k not in skip)
                return unpickler.build(obj, {})
            except (zipfile.BadZipFile, zlib.error) as e:  # a member cut short or changed: a CRC error
                raise unreadable(path, str(e), advice) from None
            except (pickle.UnpicklingError, ValueError, KeyError, EOFError, TypeError, AttributeError) as e:
                raise InputError(f"{path}: not a readable checkpoint ({e})") from None
