"""Checkpoints read without a store (docs/checkpoint.md).

Client.checkpoint(path, ...) and Client.restore(path, ...) take and load
checkpoints; an export (checkpoint(..., export=True)) holds rows without
optimizer state, for serving. CheckpointReader reads either from its
files alone, after verifying all of them:

    with recstore.CheckpointReader("/ckpt/day3") as r:
        for keys, rows in r.rows("user"):
            serve_index.add(keys, rows)
"""

import numpy as np

from . import _native


class CheckpointReader:
    """A verified checkpoint or export. tables() describes its tables;
    rows(name) yields (keys uint64, rows float32 (n, dim)) batches, with
    the optimizer state as a third array when state=True. Rows come as
    float32 whatever the table's dtype. Each table is read once, from its
    start."""

    def __init__(self, path):
        self._r = _native.Reader(path)
        self._tables = self._r.tables()
        self._index = {t["name"]: i for i, t in enumerate(self._tables)}

    def tables(self):
        """The tables, as dicts: name, dim, dtype, optimizer, lr,
        capacity and state_floats (0 in an export)."""
        return [dict(t) for t in self._tables]

    def rows(self, table, batch=65536, *, state=False):
        if table not in self._index:
            raise KeyError("no table %r in this checkpoint (it has %s)"
                           % (table, ", ".join(sorted(self._index))))
        i = self._index[table]
        while True:
            keys, rows, st = self._r.read(i, batch, state=state)
            if not len(keys):
                return
            yield (keys, rows, st) if state else (keys, rows)

    def read_all(self, table, *, state=False):
        """The whole table at once: (keys, rows[, state])."""
        parts = list(self.rows(table, state=state))
        t = self._tables[self._index[table]]
        if not parts:
            empty = (np.zeros(0, np.uint64),
                     np.zeros((0, t["dim"]), np.float32))
            return empty + ((np.zeros((0, t["state_floats"]), np.float32),)
                            if state else ())
        return tuple(np.concatenate(c) for c in zip(*parts))

    def close(self):
        self._r.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def verify(path):
    """Check every file of the checkpoint in path (sizes, checksums, every
    record); raises recstore.Error naming the damaged or missing file.
    Returns what it holds: id, tables, parts, rows, bytes, with_state."""
    return _native.verify(path)
