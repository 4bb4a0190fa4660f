"""Client and Table: the store's calls on numpy arrays and torch tensors.

Keys are unsigned 64-bit ids; they may come as int64 (torch has no uint64)
and must not be negative. Rows and gradients are float32 and C-contiguous.
A call that fails as a whole raises recstore.Error (code and message of
the library). Keys that fail individually raise KeyFailure, which names
them; a missing key is never returned as a row of zeros.
"""

import numpy as np

from . import _native

try:  # torch is optional for the plain table calls
    import torch
except ImportError:  # pragma: no cover - torch is installed with the package
    torch = None


class KeyFailure(LookupError):
    """Some keys of a call failed: .keys (numpy uint64) and .codes (int32:
    0 = missing, < 0 = the library's error code for that key)."""

    def __init__(self, what, table, keys, codes):
        self.table = table
        self.keys = keys
        self.codes = codes
        shown = ", ".join(
            "%d (%s)" % (k, "missing" if c == 0 else _native.strerror(int(c)))
            for k, c in zip(keys[:8].tolist(), codes[:8].tolist()))
        more = "" if len(keys) <= 8 else ", ... (%d in all)" % len(keys)
        super().__init__("%s on table '%s': %d key(s) failed: %s%s"
                         % (what, table, len(keys), shown, more))


def _as_numpy(x, what, dtype):
    """A numpy view of x (numpy array or CPU torch tensor) without copying.

    Refuses what would need a copy or a conversion (wrong dtype, non-
    contiguous, GPU tensor) with TypeError/ValueError: silent conversions
    hide bugs and cost time on every batch."""
    if torch is not None and isinstance(x, torch.Tensor):
        if x.device.type != "cpu":
            raise ValueError("%s must be a CPU tensor, not on %s"
                             % (what, x.device))
        if not x.is_contiguous():
            raise ValueError("%s must be contiguous (call .contiguous())"
                             % what)
        x = x.detach().numpy()
    elif not isinstance(x, np.ndarray):
        raise TypeError("%s must be a numpy array or a torch tensor, not %s"
                        % (what, type(x).__name__))
    if dtype == "keys":
        if x.dtype not in (np.int64, np.uint64):
            raise TypeError("%s must be int64 or uint64, not %s"
                            % (what, x.dtype))
    elif x.dtype != np.float32:
        raise TypeError("%s must be float32, not %s" % (what, x.dtype))
    if not x.flags.c_contiguous:
        raise ValueError("%s must be C-contiguous "
                         "(numpy.ascontiguousarray)" % what)
    return x


class Table:
    """A table of a Client (Client.table(name)); thread-safe like the
    client. Calls take numpy arrays or CPU tensors."""

    def __init__(self, native):
        self._t = native
        self.name = native.name
        self.dim = native.dim

    def _keys(self, keys):
        k = _as_numpy(keys, "keys", "keys")
        if k.ndim != 1:
            raise ValueError("keys must be one-dimensional, not of shape %s"
                             % (k.shape,))
        return k

    def _check(self, what, keys, status, allow_missing=False):
        bad = status < 0 if allow_missing else status <= 0
        if bad.any():
            raise KeyFailure(what, self.name,
                             keys[bad].astype(np.uint64), status[bad])

    def get(self, keys, out=None, *, init=False, allow_missing=False,
            rpc=False):
        """Rows of keys as a float32 array (n, dim), or into out (numpy or
        tensor, filled in place). init=True creates missing keys from the
        table's initializer. Missing keys raise KeyFailure unless
        allow_missing; then use get_with_status()."""
        k = self._keys(keys)
        o = None if out is None else _as_numpy(out, "out", "rows")
        rows, status = self._t.get(k, o, init=init, rpc=rpc)
        self._check("get_or_init" if init else "get", k, status,
                    allow_missing)
        return rows if out is None else out

    def get_with_status(self, keys, *, init=False, rpc=False):
        """(rows, status): status per key 1 found, 2 created, 0 missing
        (row untouched, zero here), < 0 error code. Never raises for keys."""
        k = self._keys(keys)
        rows = np.zeros((len(k), self.dim), dtype=np.float32)
        _, status = self._t.get(k, rows, init=init, rpc=rpc)
        return rows, status

    def update(self, keys, grads, *, lr=None, create=False):
        """Apply the table's optimizer with gradients (n, dim). Duplicate
        keys are summed into one step. lr: this step's learning rate (a
        schedule; None: the table's). Missing keys raise KeyFailure, or
        with create=True are handled by the table's policy: created from
        the initializer, then the step (status 2), or in a table with
        admission a sighting whose gradient is dropped until the key is
        admitted (status 1; docs/eviction.md)."""
        k = self._keys(keys)
        g = _as_numpy(grads, "grads", "rows")
        status = self._t.update(k, g, lr=lr, create=create)
        self._check("update", k, status)
        return status

    def spec(self, *, refresh=False):
        """The table's spec as its node reports it: a dict of
        create_table()'s keywords (fetched once, then kept)."""
        return self._t.spec(refresh=refresh)

    def init_rows(self, keys):
        """The rows get(keys, init=True) would create for keys that are
        missing, computed here from the table's initializer: nothing is
        written (a forward in evaluation)."""
        return self._t.init_rows(self._keys(keys))

    def set_row_cache(self, nbytes, max_stale_steps=None):
        """Keep hot rows of this table on this client, in at most nbytes of
        memory (rows, metadata, frequency sketch), admitted by frequency
        (docs/client.md, "Row cache"). max_stale_steps None (exact): a get
        of a cached key READs only the row's 16-byte version and checksum
        and uses the copy if it is unchanged; k >= 0: a copy at most k
        steps old (Client.step()) is used without any READ. Updates of the
        table bring the new rows back, so rows this client updates stay
        cached and current. nbytes 0 removes the cache. Raises
        recstore.Error if nbytes cannot hold 8 rows, RuntimeError while
        calls of the client run in other threads."""
        self._t.set_row_cache(nbytes, max_stale_steps)

    def prefetch_index(self):
        """READ this table's whole index, at every node, into the
        client's bucket-image cache (Client(bucket_cache_bytes=...),
        default 32 MiB): a first get of any existing key then takes one
        READ instead of two dependent rounds (docs/client.md, "Bucket
        images"). Returns the images entered; raises recstore.Error if
        the cache is disabled."""
        return self._t.prefetch_index()

    def put(self, keys, values):
        """Write rows (create or overwrite; optimizer state starts fresh)."""
        k = self._keys(keys)
        v = _as_numpy(values, "values", "rows")
        status = self._t.put(k, v)
        self._check("put", k, status)
        return status

    def delete(self, keys, *, allow_missing=True):
        k = self._keys(keys)
        status = self._t.delete(k)
        self._check("delete", k, status, allow_missing)
        return status

    def __repr__(self):
        return "recstore.Table(%r, dim=%d)" % (self.name, self.dim)


class Client(_native.Client):
    """A connection to the memory nodes ("addr:port,addr:port").

    One per process: the client belongs to the process that opened it, and
    every call from a forked child raises RuntimeError (open a new client
    there). Thread-safe: several threads may call at once; the GIL is
    released while a call waits for the network.

    Keyword arguments: device (RDMA device name or IP), cache_entries,
    conns_per_node, timeout_ms, rpc_reads, spin_us, key_id and secret_file
    (credentials, docs/security.md), replica_reads (cluster mode: READ at
    any ready replica, default True; docs/replication.md),
    bucket_cache_bytes (index bucket images, default 32 MiB, 0: none;
    Table.prefetch_index).

    checkpoint(path, *, tables=None, export=False, freeze_ms=0,
    progress=None, incremental=None) and restore(path, *, tables=None,
    progress=None) take and load checkpoints (incremental: the directory
    of the base, next to path, for an increment; restoring an increment
    restores its chain of bases first) (docs/checkpoint.md) and return a dict (id,
    tables, parts, rows, bytes, raw_bytes, paused_s, elapsed_s,
    with_state); progress(dict) is called at most once a second.

    step() advances the step clock that row caches with bounded staleness
    count (Table.set_row_cache) and returns the new step. stats() returns
    the library's counters (struct rs_client_stats), among them
    reads_posted, the row caches' row_cache_* counters and the bucket
    images' bucket_cache_* counters.
    """

    def table(self, name):
        return Table(super().table(name))

    def get_multi(self, items, *, rpc=False, nocache=False, init=False):
        """Rows of keys of several tables in one round of one-sided READs
        (one doorbell per node): items [(table, keys, out)], out a float32
        (n, dim) array filled in place. Returns one status array per item
        (1 found, 0 missing: out's row untouched, < 0 error code).
        init=True: get-or-init in the same call (RS_F_INIT): a key not
        found at its first bucket READ is asked of its primary by
        GET_OR_INIT, which returns its row or creates it (status 2)."""
        return super().get_multi(
            [(t._t, t._keys(k), _as_numpy(o, "out", "rows"))
             for t, k, o in items], rpc=rpc, nocache=nocache, init=init)

    def update_multi(self, items):
        """The updates of several tables in one call: items [(table, keys,
        grads, lr, create)] as Table.update()'s arguments. Returns one
        status array per item; a call that fails as a whole raises."""
        return super().update_multi(
            [(t._t, t._keys(k), _as_numpy(g, "grads", "rows"), lr,
              bool(create)) for t, k, g, lr, create in items])

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
