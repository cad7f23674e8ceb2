"""Embeddings as a dataset's features (``ringgnn embed RUN --attach DS --name NAME``, issue 24):
a new dataset ``NAME`` beside ``DS`` that is ``DS`` with the run's node embeddings as its
feature file, so that ``ringgnn train NAME`` (or any reader of the format) trains a downstream
model on them with no conversion.

The choice (``docs/INFERENCE.md``, "Embeddings as features"): a **copy**, as a PyG user makes a
new ``Data`` with ``x`` replaced, not a second feature file inside ``DS``, which the dataset
format (version 2: exactly one feature file) does not have and every reader would then have to
choose between. The copy shares ``DS``'s graph, labels, splits, edge splits and original ids by
hard links (copied where the file system cannot link), so it costs only the embeddings' bytes;
its ``features.bin`` is written in the feature-file layout (``docs/FORMAT.md``) and its
manifest records the new file's size and CRC-32C (``ringgnn verify NAME`` checks them) and, in
``source``, the run, the layer, ``DS``'s own ``source`` and, on a dataset with times, the time
the graph was taken at (``--at``, null: every edge). Everything is built in a locked
temporary directory beside ``DS`` and renamed to ``NAME`` when complete: an error, Ctrl-C or a
full disk leaves nothing. The embeddings are streamed, block by block, from the layer-wise
inference to the file: nothing in memory grows with the number of nodes but the plan's.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from typing import Any, Callable, Dict, Optional

from .. import _core, _options
from .._core import InputError
from .._files import os_errors, temporary
from ..data.build import read_manifest
from ..data.dataset import open_homogeneous
from .rows import _STORED, RowFileWriter, _layout, check_output
from .run import LayerwiseInference, embedding_layer, open_run

#: A new dataset's name: a plain directory name.
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def destination(target: str, name: str) -> str:
    """Where ``--name NAME`` puts the copy of dataset ``target``: beside it."""
    if not NAME.match(name or ""):
        raise InputError(f"--name {name!r}: give a plain directory name (letters, digits, '_', '.', '-'), "
                         "the new dataset goes beside --attach's")
    dest = os.path.join(os.path.dirname(os.path.abspath(target)), name)
    if os.path.lexists(dest):
        raise InputError(f"--name {name}: {dest} already exists; choose another name or remove it")
    return dest


def attach_embeddings(run_dir: str, target: str, name: str, *, dataset: Optional[str] = None,
                      layer: Optional[int] = None, dtype: str = "f32", memory: Optional[int] = None,
                      backend: str = "auto", direct: bool = False, quiet: bool = True,
                      hidden_dtype: Optional[str] = None, device: Optional[str] = None,
                      log: Callable[[str], None] = lambda s: None, at: Optional[int] = None) -> Dict[str, Any]:
    """Write run ``run_dir``'s embeddings of every node (layer ``layer``, by default as
    ``ringgnn embed`` takes it; on the graph as of time ``at``, ``ringgnn.infer``'s) as the
    features of a copy of dataset ``target`` named ``name`` (see the module's docstring);
    returns a summary."""
    check_output(None, dtype)
    src, ckpt = open_run(run_dir, dataset, arrays=True)
    upto = embedding_layer(ckpt, layer)
    tgt = open_homogeneous(target, "--attach")
    if tgt.num_nodes != src.num_nodes:
        raise InputError(f"--attach {target}: it has {tgt.num_nodes:,} nodes, but the embeddings have one row per "
                         f"node of {src.path} ({src.num_nodes:,}); attach them to a dataset of the same nodes")
    dest = destination(target, name)
    manifest = read_manifest(tgt.path)
    run = LayerwiseInference(src, ckpt, memory=_options.size(memory, "memory"), backend=backend, direct=direct,
                             quiet=quiet, log=log, hidden_dtype=hidden_dtype, device=device,
                             work_dir=os.path.dirname(dest), at=at)
    width = run.widths[upto]
    try:
        scratch = temporary(os.path.dirname(dest), name, directory=True)
    except BaseException:
        run.close()
        raise
    try:
        for key, entry in manifest["files"].items():
            if key != "features":
                _link_or_copy(os.path.join(tgt.path, entry["path"]), os.path.join(scratch.path, entry["path"]))
        writer = RowFileWriter(os.path.join(scratch.path, "features.bin"), width, dtype)
        path = writer.fill(lambda put: run.run(upto, None, put, activate_last=True))
        size, crc = _core.file_crc32c(path)
        row, per_page = _layout(width, _STORED[dtype].itemsize)
        n = tgt.num_nodes
        last = n - 1
        offset = (last // per_page) * 4096 + (last % per_page) * row if per_page else last * row
        payload = 0 if n == 0 else offset + row  # FORMAT.md: row_offset(V - 1) + row_bytes
        manifest["features"] = dict(dim=width, dtype=dtype, row_bytes=row, rows_per_page=per_page)
        manifest["files"]["features"] = dict(path="features.bin", bytes=size, payload_bytes=payload, crc32c=crc)
        manifest["source"] = dict(command="embed --attach", run=os.path.abspath(run_dir), checkpoint=ckpt.path,
                                  layer=upto, hidden_dtype=run.hidden_dtype, dataset=os.path.abspath(tgt.path),
                                  dataset_source=manifest.get("source"),
                                  **({"at": run.times["at"]} if run.times else {}))
        mpath = os.path.join(scratch.path, "manifest.json")
        with os_errors("writing", mpath):
            with open(mpath, "w") as f:
                f.write(json.dumps(manifest, indent=2) + "\n")
                f.flush()
                os.fsync(f.fileno())
        _core.read_manifest(scratch.path)  # the core's checks of the new manifest, before it appears
        with os_errors("creating", dest):
            scratch.commit(dest)
    except BaseException:
        scratch.close()
        raise
    finally:
        run.close()
    return dict(dataset=dest, attached_to=os.path.abspath(tgt.path), run=os.path.abspath(run_dir), layer=upto,
                rows=tgt.num_nodes, dim=width, dtype=dtype, crc32c=crc, bytes=size, plan=run.plan, **run.times,
                **run.stats)


def _link_or_copy(src: str, dst: str) -> None:
    """``dst`` as a hard link to ``src`` (the same bytes, no space), else a copy."""
    with os_errors("linking", dst):
        try:
            os.link(src, dst)
        except OSError:
            shutil.copyfile(src, dst)

