"""EmbeddingBagCollection: pooled embedding lookups served by the store.

The conventions are torch.nn.EmbeddingBag's and TorchRec's
EmbeddingBagCollection: one config per table (name, dim, the features that
share it, pooling, optimizer and its hyper-parameters, initializer), a
batch of jagged features in (recstore.JaggedFeatures, or anything with
TorchRec's KeyedJaggedTensor interface), one dense (B, sum of dims) tensor
out with KeyedTensor's interface.

Lookups (docs/python.md, "The data path"). One forward looks up every
table of the batch in ONE call: each table's distinct ids over all its
features (a table shared by several features is fetched once) go to
Client.get_multi, one-sided RDMA READs through the location cache, one
doorbell per node, which costs the memory nodes no CPU. Only ids that
come back missing go further:
  - training (module.training and grad enabled): GET_OR_INIT by RPC,
    which creates them on their node (first-time ids only);
  - otherwise (eval(), torch.no_grad()): the table's initializer row,
    computed here exactly as the node would create it; nothing is written.
Pooling is torch.nn.functional.embedding_bag, so sum and mean pooling and
per-sample weights have torch's exact semantics.

Updates. Backward folds the gradient of every distinct id (the
embedding_bag backward sums an id's occurrences) and hands the whole
batch, all tables, to one update thread: one Client.update_multi call per
batch, sent while the trainer goes on (optimizer step of the dense part,
the next batch's loading and prefetch). The memory node runs the table's
optimizer. Updates ask for the table's policy on missing ids (created, or
a sighting toward admission), so tables with eviction or admission train
without exceptions in backward. A second backward of the same graph
(retain_graph=True) sends nothing again.

Staleness policy (staleness=k, default 0): a lookup never returns a row
that misses more than k of this trainer's own update batches; with 0 a
trainer never reads a row older than the last update it sent. A forward
reads at once the ids that no more than k of the update batches in
flight touched (overlapping those batches); the others wait until at
most k batches are in flight and are read then. Prefetched
rows (prefetch(next_batch)) are checked against the update batches sent
after the prefetch was issued; ids touched by more than k of them are
read again at forward time. staleness=None accepts any row and never
waits. An update that fails raises at the next forward, flush() or
close().

Row cache (cache_bytes, cache_staleness of a table's config; docs/
python.md, "Row cache"). The collection gives each table with cache_bytes
a row cache of the client library on opening it (Table.set_row_cache):
hot rows kept on this trainer, proven current by a 16-byte READ of their
version and checksum (cache_staleness None), or used without any READ
while at most cache_staleness steps old. The step clock is the client's
(Client.step()), advanced once per forward in training mode, prefetched
batch or not. Updates bring the rows back, so rows this trainer updates
stay cached and current. cache_stats() reports hits, probes and bytes.

Bucket images (prefetch_index=True, the default). On opening its tables
the collection READs each table's whole index into the client's
bucket-image cache (Table.prefetch_index; bounded by the client's
bucket_cache_bytes, default 32 MiB; skipped when that is 0), so the first
lookup of any existing id takes one READ of its row instead of bucket
READs and then the row; index_images tells how many images it entered.

Training loops. update_mode="step" holds the updates of every backward
until an explicit step() (gradient accumulation); no_sync() holds them
inside its block (the embedding side of DDP's no_sync()); grad_hook(table,
keys, grads) -> grads sees every gradient before it is sent (unscaling by
a GradScaler, clipping).

Checkpoints. state_dict() carries the table specs and the last checkpoint
taken with checkpoint(path) (torch's extra state); load_state_dict()
checks the specs against the store and verifies or restores that
checkpoint (on_load="verify" or "restore"). Opening a table whose stored
spec differs from its config raises ValueError naming the field.
"""

import concurrent.futures
import contextlib
import dataclasses
import math
import threading
import time
import warnings
import weakref

import numpy as np
import torch
import torch.nn.functional as F

from . import _native
from .client import KeyFailure
from .jagged import JaggedFeatures

# A prefetch never consumed is dropped after this many update batches, so
# the update history it keeps alive stays bounded.
_PREFETCH_MAX_LAG = 64
# Prefetches pending at most (prefetch() drops the oldest beyond it).
_MAX_PREFETCH = 8
# Update batches in flight before a backward waits for the oldest.
_MAX_INFLIGHT = 2


@dataclasses.dataclass
class EmbeddingBagConfig:
    name: str
    embedding_dim: int
    feature_names: list
    pooling: str = "sum"            # "sum" or "mean" (or TorchRec's PoolingType)
    optimizer: str = "sgd"          # sgd, adagrad, rowwise_adagrad, adam
    lr: float = None                # None: the optimizer's default
    eps: float = None
    beta1: float = None
    beta2: float = None
    weight_decay: float = None
    initial_accumulator: float = None
    decoupled_weight_decay: bool = False
    init: str = "zeros"             # zeros, constant, uniform, normal
    init_value: float = None
    init_a: float = None
    init_std: float = None
    init_seed: int = 0
    num_embeddings: int = 0         # rows per node; 0: the node's default
    dtype: str = "fp32"
    cache_bytes: int = 0            # row cache on this trainer; 0: none
    cache_staleness: int = None     # None: exact probes; k: rows <= k steps
                                    # old used without a READ

    @classmethod
    def from_torchrec(cls, cfg, **overrides):
        """A config from a torchrec.modules.embedding_configs
        .EmbeddingBagConfig (duck-typed: name, embedding_dim,
        num_embeddings, feature_names, pooling). TorchRec's default
        initializer is kept: uniform in +-sqrt(1 / num_embeddings), unless
        the TorchRec config sets weight_init_min/max. num_embeddings
        becomes the per-node row capacity. overrides: any field of this
        class (optimizer, lr, ...)."""
        pooling = _pooling_name(getattr(cfg, "pooling", "sum"))
        n = int(getattr(cfg, "num_embeddings", 0) or 0)
        lo = getattr(cfg, "weight_init_min", None)
        hi = getattr(cfg, "weight_init_max", None)
        if lo is not None and hi is not None:
            if not math.isclose(-float(lo), float(hi)):
                raise ValueError("table %r: weight_init_min/max (%g, %g) "
                                 "are not symmetric; the store's uniform "
                                 "initializer is in [-a, a]"
                                 % (cfg.name, lo, hi))
            a = float(hi)
        else:
            a = math.sqrt(1.0 / n) if n > 0 else 0.01
        kw = dict(name=cfg.name, embedding_dim=int(cfg.embedding_dim),
                  feature_names=list(cfg.feature_names) or [cfg.name],
                  pooling=pooling, init="uniform", init_a=a,
                  num_embeddings=n)
        kw.update(overrides)
        return cls(**kw)


def _check_cache(cfg):
    """cache_bytes an int >= 0, cache_staleness None or an int >= 0."""
    for field, none_ok in (("cache_bytes", False), ("cache_staleness", True)):
        v = getattr(cfg, field)
        if v is None and none_ok:
            continue
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ValueError("table %r: %s must be %san int >= 0, not %r"
                             % (cfg.name, field,
                                "None or " if none_ok else "", v))


# cache_stats() keys and the client counters (Client.stats()) they come
# from; all but "bytes" count since the collection opened.
_CACHE_STATS = (("hits", "row_cache_hits"),
                ("stale_hits", "row_cache_stale_hits"),
                ("probes", "row_cache_probes"),
                ("probe_misses", "row_cache_probe_misses"),
                ("fills", "row_cache_fills"),
                ("update_rows", "row_cache_update_rows"),
                ("evictions", "row_cache_evictions"),
                ("rejects", "row_cache_rejects"),
                ("invalidations", "row_cache_invalidations"),
                ("bytes_saved", "row_cache_bytes_saved"),
                ("reads_posted", "reads_posted"),
                ("bytes", "row_cache_bytes"))


def _cache_counters(cs):
    return {k: int(cs.get(c, 0)) for k, c in _CACHE_STATS}


def _pooling_name(p):
    """"sum"/"mean", from a str or TorchRec's PoolingType (an Enum whose
    name is SUM or MEAN)."""
    name = getattr(p, "name", p)
    if isinstance(name, str) and name.lower() in ("sum", "mean"):
        return name.lower()
    raise ValueError("pooling must be 'sum' or 'mean' (or TorchRec's "
                     "PoolingType.SUM/MEAN), not %r" % (p,))


# The spec's float hyper-parameters a config may set, named as
# create_table()'s keywords and its spec dicts, from the library's field
# table (_native.SPEC_FIELDS: keyword, type, defaults, lo, hi, kinds that
# use it); compared with the stored spec when the config sets them (None:
# keep the store's). An initializer's are compared only under its kinds.
_SPEC_ROWS = [r for r in _native.SPEC_FIELDS if r[1] == "float"]
_INIT_KINDS = ("zeros", "constant", "uniform", "normal")
_SPEC_FLOATS = tuple(r[0] for r in _SPEC_ROWS
                     if not r[0].startswith("init_"))
_INIT_FLOATS = tuple(r[0] for r in _SPEC_ROWS if r[0].startswith("init_"))
_INIT_FIELDS = {k: tuple(r[0] for r in _SPEC_ROWS
                         if r[0].startswith("init_") and k in r[5])
                for k in _INIT_KINDS}
_missing = [f for f in _SPEC_FLOATS + _INIT_FLOATS
            if f not in EmbeddingBagConfig.__dataclass_fields__]
if _missing:  # a field added to the table needs its config field too
    raise ImportError("EmbeddingBagConfig lacks the spec fields %s"
                      % ", ".join(_missing))


def _spec_mismatch(cfg, spec):
    """(field, stored, configured) of the first field where the stored
    spec differs from the config, or None."""
    want = [("dim", cfg.embedding_dim), ("optimizer", cfg.optimizer),
            ("dtype", {"float32": "fp32", "float16": "fp16",
                       "bfloat16": "bf16"}.get(cfg.dtype, cfg.dtype)),
            ("init", cfg.init), ("init_seed", cfg.init_seed),
            ("decoupled_weight_decay", bool(cfg.decoupled_weight_decay))]
    for f in _SPEC_FLOATS + _INIT_FIELDS.get(cfg.init, ()):
        v = getattr(cfg, f)
        if v is not None:
            want.append((f, np.float32(v)))
    for field, v in want:
        have = spec.get(field)
        if isinstance(v, np.float32):
            same = np.float32(have) == v
        else:
            same = have == v
        if not same:
            return field, have, v
    return None


class PooledEmbeddings:
    """The forward's output, with TorchRec's KeyedTensor interface:
    values() is (B, sum of dims); keys() the features in column order;
    length_per_key() their dims, offset_per_key() their column offsets
    (one more entry: the width); to_dict() and [feature] their columns.
    layout() maps each feature to (column offset, dim)."""

    def __init__(self, values, feature_names, layout):
        self._values = values
        self._names = feature_names
        self._layout = layout

    def values(self):
        return self._values

    def keys(self):
        return list(self._names)

    def feature_names(self):
        return list(self._names)

    def key_dim(self):
        return 1

    def length_per_key(self):
        return [self._layout[f][1] for f in self._names]

    def offset_per_key(self):
        offs = [self._layout[f][0] for f in self._names]
        return offs + [offs[-1] + self._layout[self._names[-1]][1]]

    def layout(self):
        return dict(self._layout)

    def __getitem__(self, feature):
        off, dim = self._layout[feature]
        return self._values[:, off:off + dim]

    def to_dict(self):
        return {f: self[f] for f in self._names}

    def to(self, device, non_blocking=False):
        return PooledEmbeddings(self._values.to(device,
                                                non_blocking=non_blocking),
                                self._names, self._layout)


class _Lookup(torch.autograd.Function):
    """rows of all tables fetched from the store -> the same rows, with a
    backward that hands their folded gradients to the collection as one
    update batch (once per graph, however often backward runs)."""

    @staticmethod
    def forward(ctx, anchor, batch, *rows):
        ctx.batch = batch
        ctx.set_materialize_grads(False)  # a table whose rows got no
        return tuple(r.view_as(r) for r in rows)  # gradient: no update

    @staticmethod
    def backward(ctx, *grads):
        batch = ctx.batch
        if not batch.applied:
            batch.applied = True
            batch.ebc._backward(batch, grads)
        return (None, None) + (None,) * len(grads)


class _Batch:
    """What one forward looked up: per table (keys, rows) in table order;
    the backward's gradients go with it."""

    def __init__(self, ebc, names, keys):
        self.ebc = ebc
        self.names = names
        self.keys = keys
        self.applied = False


class _Prefetch:
    def __init__(self, features, seq, training, future):
        self.features = features
        self.seq = seq
        self.training = training
        self.future = future


# Collections by id, for the fx leaf below (a graph holds the id, not the
# module object).
_COLLECTIONS = weakref.WeakValueDictionary()


@torch.fx.wrap
def recstore_lookup(ebc_id, features):
    """The collection's whole lookup as one function call: symbolic tracing
    (torch.fx) records it as a single leaf node instead of tracing the
    store's calls."""
    return _COLLECTIONS[ebc_id]._lookup_pooled(features)


class EmbeddingBagCollection(torch.nn.Module):
    def __init__(self, client, tables, *, staleness=0, create=True,
                 update_mode="backward", grad_hook=None,
                 on_load="verify", check_spec=True, prefetch_index=True):
        super().__init__()
        if staleness is not None and (not isinstance(staleness, int)
                                      or staleness < 0):
            raise ValueError("staleness must be None or an int >= 0")
        if update_mode not in ("backward", "step"):
            raise ValueError("update_mode must be 'backward' or 'step', "
                             "not %r" % (update_mode,))
        if on_load not in ("verify", "restore"):
            raise ValueError("on_load must be 'verify' or 'restore', not %r"
                             % (on_load,))
        self._client = client
        self._configs = {}
        self._tables = {}
        self._feature_table = {}
        self.staleness = staleness
        self.update_mode = update_mode
        self.grad_hook = grad_hook
        self.on_load = on_load
        names = []
        for cfg in tables:
            if cfg.name in self._configs:
                raise ValueError("table %r configured twice" % cfg.name)
            cfg.pooling = _pooling_name(cfg.pooling)
            _check_cache(cfg)
            if not cfg.feature_names:
                raise ValueError("table %r has no features" % cfg.name)
            for f in cfg.feature_names:
                if f in self._feature_table:
                    raise ValueError("feature %r is on tables %r and %r"
                                     % (f, self._feature_table[f], cfg.name))
                self._feature_table[f] = cfg.name
                names.append(f)
            self._configs[cfg.name] = cfg
        if create:
            self._create_tables()
        for name, cfg in self._configs.items():
            t = client.table(name)
            if t.dim != cfg.embedding_dim:
                raise ValueError("table %r has dim %d on the store, the "
                                 "config says %d" % (name, t.dim,
                                                     cfg.embedding_dim))
            if check_spec:
                self._check_spec(cfg, t.spec())
            if cfg.cache_bytes:
                t.set_row_cache(cfg.cache_bytes, cfg.cache_staleness)
            self._tables[name] = t
        # a first lookup of any existing key in one READ: every table's
        # index into the client's bucket-image cache (its capacity bounds
        # what is READ)
        self.index_images = 0
        if prefetch_index and client.stats().get("bucket_cache_capacity"):
            for t in self._tables.values():
                self.index_images += t.prefetch_index()
        self._names = list(self._configs)
        self._features = names
        self._layout = {}
        off = 0
        for f in names:
            d = self._configs[self._feature_table[f]].embedding_dim
            self._layout[f] = (off, d)
            off += d
        self._width = off
        # requires grad, so that every lookup's backward runs; not a
        # Parameter: torch optimizers never see it
        self._anchor = torch.zeros((), requires_grad=True)
        self._lock = threading.Lock()
        self._cv = threading.Condition(self._lock)
        self._seq = 0               # update batches handed to the thread
        self._done = 0              # of those, finished (sent or failed)
        self._error = None          # the first failed update, to raise
        self._history = []          # (seq, table, keys) since oldest prefetch
        self._held = []             # update_mode "step" / no_sync: batches
        self._holding = 0           # no_sync() depth
        self._pending = []          # prefetches not yet consumed, oldest first
        self._lr = {}               # table -> this step's lr (set_learning_rate)
        self._ckpt = None           # the last checkpoint() taken
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="recstore-prefetch")
        self._upool = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="recstore-update")
        self.stats = {"lookups": 0, "lookup_keys": 0, "read_keys": 0,
                      "init_rpc_keys": 0, "init_local_keys": 0,
                      "updates": 0, "update_batches": 0, "update_keys": 0,
                      "update_created_keys": 0, "prefetched": 0,
                      "prefetch_dropped": 0, "refetched_keys": 0,
                      "lookup_s": 0.0, "update_s": 0.0,
                      "update_wait_s": 0.0, "overlapped_lookups": 0,
                      "waited_keys": 0, "second_reads": 0}
        self._steps = 0             # client.step() calls of this collection
        self._cache_base = (_cache_counters(client.stats())
                            if self.cached_tables() else None)
        _COLLECTIONS[id(self)] = self
        self._fx_id = id(self)

    def _create_tables(self):
        for cfg in self._configs.values():
            kw = dict(optimizer=cfg.optimizer, init=cfg.init,
                      init_seed=cfg.init_seed, capacity=cfg.num_embeddings,
                      dtype=cfg.dtype,
                      decoupled_weight_decay=cfg.decoupled_weight_decay,
                      exist_ok=True)
            for k in _SPEC_FLOATS + _INIT_FLOATS:
                v = getattr(cfg, k)
                if v is not None:
                    kw[k] = v
            self._client.create_table(cfg.name, cfg.embedding_dim, **kw)

    @staticmethod
    def _check_spec(cfg, spec):
        bad = _spec_mismatch(cfg, spec)
        if bad is not None:
            raise ValueError("table %r exists on the store with %s=%r, the "
                             "config says %r (drop it, or make the config "
                             "match)" % (cfg.name, bad[0], bad[1], bad[2]))

    # ---- introspection ----

    def feature_names(self):
        return list(self._features)

    def layout(self):
        """{feature: (column offset, dim)} of the forward's output."""
        return dict(self._layout)

    def embedding_bag_configs(self):
        return list(self._configs.values())

    def table(self, name):
        return self._tables[name]

    def cached_tables(self):
        """{table: (cache_bytes, cache_staleness)} of the tables with a row
        cache (cache_staleness None: exact)."""
        return {n: (c.cache_bytes, c.cache_staleness)
                for n, c in self._configs.items() if c.cache_bytes}

    def cache_stats(self):
        """The row caches' figures since this collection opened (the
        client's counters, Client.stats(): tables of other collections of
        the same client count too): hits (keys served from a cache),
        stale_hits (of those, used without a probe), probes (16-byte
        version READs), probe_misses (probes that found the row changed,
        then READ), fills, update_rows (rows update replies brought back),
        evictions, rejects, invalidations, bytes_saved (row bytes not
        READ), reads_posted (one-sided READ work requests, rows and
        probes), bytes (memory the caches hold now), steps (training
        forwards counted on the step clock). All 0 without a cached
        table."""
        out = {k: 0 for k, _ in _CACHE_STATS}
        out["steps"] = self._steps
        if self._cache_base is None:
            return out
        now = _cache_counters(self._client.stats())
        for k, _ in _CACHE_STATS:
            out[k] = now[k] - (0 if k == "bytes" else self._cache_base[k])
        return out

    # ---- inputs ----

    def _as_features(self, features):
        """(JaggedFeatures with exactly this collection's features, the
        input's device). Takes JaggedFeatures or a KeyedJaggedTensor-like
        object (keys(), values(), lengths() or offsets(),
        weights_or_none()); features the collection does not use are
        dropped; ids may be int32 or int64, on any device."""
        device = torch.device("cpu")
        if not isinstance(features, JaggedFeatures):
            if not (hasattr(features, "keys") and hasattr(features, "values")
                    and (hasattr(features, "lengths")
                         or hasattr(features, "offsets"))):
                raise TypeError("features must be recstore.JaggedFeatures "
                                "or a KeyedJaggedTensor, not %s"
                                % type(features).__name__)
            features, device = self._from_kjt(features)
        have = features.keys()
        missing = [f for f in self._features if f not in have]
        if missing:
            raise ValueError("batch features do not match the collection: "
                             "missing %s (it has %s)" % (missing, have))
        return features, device

    def _from_kjt(self, kjt):
        values = kjt.values()
        device = values.device
        host = (lambda t: t) if device.type == "cpu" else (
            lambda t: None if t is None else t.to("cpu", non_blocking=True))
        keys = list(kjt.keys())
        values = host(values)
        weights = getattr(kjt, "weights_or_none", lambda: None)()
        weights = host(weights)
        lengths = kjt.lengths() if hasattr(kjt, "lengths") else None
        offsets = None
        if lengths is None:
            offsets = host(kjt.offsets())
        else:
            lengths = host(lengths)
        if device.type == "cuda":
            torch.cuda.current_stream(device).synchronize()
        jf = JaggedFeatures(keys, values, lengths=lengths, offsets=offsets,
                            weights=weights)
        unused = [f for f in keys if f not in self._layout]
        if unused:   # extra features: keep only ours
            parts = {}
            for f in self._features:
                v, o, w = jf.feature(f)
                lens = o[1:] - o[:-1]
                parts[f] = (v, lens) if w is None else (v, lens, w)
            jf = JaggedFeatures.from_dict(parts)
        return jf, device

    def _table_ids(self, features, name):
        """Ids of table `name` over its features (in config order), the
        offsets of their F * B bags and their weights."""
        cfg = self._configs[name]
        vals, offs, wts = [], [], []
        base = 0
        for f in cfg.feature_names:
            v, o, w = features.feature(f)
            vals.append(v)
            offs.append(o[:-1] + base)
            wts.append(w)
            base += v.numel()
        offsets = torch.cat(offs + [torch.tensor([base], dtype=torch.int64)])
        weights = None
        if features.weights() is not None:
            if cfg.pooling != "sum":
                raise ValueError("table %r: per-sample weights need sum "
                                 "pooling (as torch.nn.EmbeddingBag)" % name)
            weights = torch.cat(wts)
        return torch.cat(vals), offsets, weights

    def _unique(self, features):
        """{table: (unique keys (numpy uint64), inverse, offsets, weights)}"""
        out = {}
        for name in self._names:
            ids, offsets, weights = self._table_ids(features, name)
            uniq, inverse = torch.unique(ids, sorted=True, return_inverse=True)
            keys = np.ascontiguousarray(uniq.numpy()).view(np.uint64)
            out[name] = (keys, inverse, offsets, weights)
        return out

    # ---- lookups ----

    def _read(self, keys_of, training):
        """{table: rows} of {table: keys}: one get_multi over every table,
        then the missing ones created (training) or computed from the
        initializer (not training)."""
        names = [n for n in self._names if n in keys_of]
        t0 = time.perf_counter()
        rows = {n: np.empty((len(keys_of[n]), self._tables[n].dim),
                            dtype=np.float32) for n in names}
        # training: get-or-init in the same call (a key not found at its
        # first bucket READ is created by its primary's GET_OR_INIT, with
        # no second round to prove it absent first)
        st = self._client.get_multi([(self._tables[n], keys_of[n], rows[n])
                                     for n in names], init=training)
        found = rpc = local = 0
        for n, s in zip(names, st):
            keys = keys_of[n]
            bad = s <= 0 if training else s < 0
            if bad.any():
                raise KeyFailure("get_or_init" if training else "get", n,
                                 keys[bad], s[bad])
            if training:
                created = int((s == 2).sum())
                rpc += created
                found += len(keys) - created
                continue
            miss = s == 0
            found += len(keys) - int(miss.sum())
            if not miss.any():
                continue
            rows[n][miss] = self._tables[n].init_rows(keys[miss])
            local += int(miss.sum())
        dt = time.perf_counter() - t0
        with self._lock:
            self.stats["lookups"] += 1
            self.stats["lookup_keys"] += sum(len(keys_of[n]) for n in names)
            self.stats["read_keys"] += found
            self.stats["init_rpc_keys"] += rpc
            self.stats["init_local_keys"] += local
            self.stats["lookup_s"] += dt
        return rows

    def _wait_updates(self, upto, consume=True):
        """Wait until update batches 1..upto have finished; raise the first
        failure (consume: and forget it; a prefetch leaves it for the
        trainer's thread)."""
        t0 = time.perf_counter()
        with self._cv:
            while self._done < upto:
                self._cv.wait()
            err = self._error
            if consume:
                self._error = None
            self.stats["update_wait_s"] += time.perf_counter() - t0
        if err is not None:
            raise err

    def _read_overlapped(self, uniq, training):
        """The rows of a lookup while this trainer's update batches may be
        in flight: the ids that more than `staleness` of the batches in
        flight at the start updated wait for them (until at most
        `staleness` batches are in flight) and are read then; all the
        others are read at once, overlapping the updates. With a row
        cache the waiting ids' rows came back with their updates, so
        their later read is a probe (or no READ). staleness None: no
        wait (a failed update still raises)."""
        with self._lock:
            since, upto = self._done, self._seq
        keys_of = {n: u[0] for n, u in uniq.items()}
        later = {}
        if self.staleness is not None and upto > since:
            for n, keys in keys_of.items():
                idx = self._stale_keys(n, keys, since)
                if len(idx):
                    later[n] = np.zeros(len(keys), dtype=bool)
                    later[n][idx] = True
        rows = {}
        now = {n: (k[~later[n]] if n in later else k)
               for n, k in keys_of.items()}
        got = self._read(now, training)
        for n, keys in keys_of.items():
            if n not in later:
                rows[n] = got[n]
                continue
            rows[n] = np.empty((len(keys), self._tables[n].dim),
                               dtype=np.float32)
            rows[n][~later[n]] = got[n]
        self._wait_updates(0 if self.staleness is None
                           else max(upto - self.staleness, 0))
        if later:
            again = self._read({n: keys_of[n][m] for n, m in later.items()},
                               training)
            for n, m in later.items():
                rows[n][m] = again[n]
            with self._lock:
                self.stats["waited_keys"] += sum(
                    int(m.sum()) for m in later.values())
                self.stats["second_reads"] += 1
        if upto > since:
            with self._lock:
                self.stats["overlapped_lookups"] += 1
        return {n: (u[0], rows[n], u) for n, u in uniq.items()}

    def prefetch(self, features):
        """Start fetching the rows of `features` (a coming batch) in the
        background; the forward of that same object uses them. Several
        batches may be prefetched ahead (at most 8 pending: the oldest is
        dropped). Ids missing from the store are created now if the module
        is training (and grad is enabled here), else computed from the
        initializer."""
        jf, _ = self._as_features(features)
        with self._lock:
            for p in [p for p in self._pending if p.features is features]:
                p.future.cancel()
                self._pending.remove(p)
            while len(self._pending) >= _MAX_PREFETCH:
                self._pending.pop(0).future.cancel()
                self.stats["prefetch_dropped"] += 1
        uniq = self._unique(jf)
        training = self.training and torch.is_grad_enabled()
        with self._lock:
            seq = self._seq

        def job():
            self._wait_updates(seq, consume=False)
            rows = self._read({n: u[0] for n, u in uniq.items()}, training)
            return {n: (u[0], rows[n], u) for n, u in uniq.items()}

        pre = _Prefetch(features, seq, training, self._pool.submit(job))
        with self._lock:
            self._pending.append(pre)

    def _stale_keys(self, name, keys, since):
        """Indexes of `keys` that this trainer updated in more than
        self.staleness update batches after sequence number `since`."""
        with self._lock:
            hist = [k for s, t, k in self._history if s > since and t == name]
        if not hist:
            return np.zeros(0, dtype=np.int64)
        upd, counts = np.unique(np.concatenate(hist), return_counts=True)
        over = upd[counts > self.staleness]
        return np.nonzero(np.isin(keys, over))[0]

    def _trim_history(self):
        with self._lock:
            for pre in [p for p in self._pending
                        if self._seq - p.seq > _PREFETCH_MAX_LAG]:
                pre.future.cancel()
                self._pending.remove(pre)
                self.stats["prefetch_dropped"] += 1
            # the batches still in flight too: a lookup overlapping them
            # reads their keys again (_read_overlapped)
            keep = min([p.seq for p in self._pending] + [self._done])
            self._history = [h for h in self._history if h[0] > keep]

    def _fetch_prefetched(self, pre, training):
        fetched = pre.future.result()
        with self._lock:
            self.stats["prefetched"] += 1
        if self.staleness is None:
            return fetched
        stale = {}
        for name, (keys, rows, _) in fetched.items():
            idx = self._stale_keys(name, keys, pre.seq)
            if len(idx):
                stale[name] = idx
        if stale:
            with self._lock:
                upto = self._seq
            self._wait_updates(upto)
            again = self._read({n: fetched[n][0][i]
                                for n, i in stale.items()}, training)
            for n, i in stale.items():
                fetched[n][1][i] = again[n]
                with self._lock:
                    self.stats["refetched_keys"] += len(i)
            with self._lock:
                self.stats["second_reads"] += 1
        return fetched

    def forward(self, features):
        return recstore_lookup(self._fx_id, features)

    def _lookup_pooled(self, features):
        jf, device = self._as_features(features)
        training = self.training and torch.is_grad_enabled()
        if training:    # one step of the row caches' clock per training
            self._client.step()     # forward, its rows prefetched or not
            self._steps += 1
        pre = None
        with self._lock:
            for p in self._pending:
                if p.features is features:
                    pre = p
                    self._pending.remove(p)
                    break
        if pre is not None and pre.training == training:
            fetched = self._fetch_prefetched(pre, training)
        else:
            if pre is not None:
                pre.future.cancel()
            fetched = self._read_overlapped(self._unique(jf), training)
        b = jf.batch_size()
        tensors = [torch.from_numpy(fetched[n][1]) for n in self._names]
        if training:
            batch = _Batch(self, self._names,
                           [fetched[n][0] for n in self._names])
            tensors = _Lookup.apply(self._anchor, batch, *tensors)
            if isinstance(tensors, torch.Tensor):
                tensors = (tensors,)
        per_feature = {}
        for name, emb in zip(self._names, tensors):
            cfg = self._configs[name]
            _, _, (_, inverse, offsets, weights) = fetched[name]
            pooled = F.embedding_bag(inverse, emb, offsets, mode=cfg.pooling,
                                     per_sample_weights=weights,
                                     include_last_offset=True)
            pooled = pooled.view(len(cfg.feature_names), b,
                                 cfg.embedding_dim)
            for i, f in enumerate(cfg.feature_names):
                per_feature[f] = pooled[i]
        self._trim_history()
        values = torch.cat([per_feature[f] for f in self._features], dim=1)
        if device.type != "cpu":
            values = values.to(device, non_blocking=True)
        return PooledEmbeddings(values, self._features, self._layout)

    # ---- updates ----

    def set_learning_rate(self, lr, tables=None):
        """The learning rate of the updates this collection sends from now
        on (a schedule: call it each step, e.g. with a torch LR scheduler's
        get_last_lr()[0]); tables: names (default all). None goes back to
        each table's own lr. The memory node applies it to this trainer's
        updates only; the table's configured lr is unchanged."""
        if lr is not None and not (float(lr) >= 0 and float(lr) < float("inf")):
            raise ValueError("lr must be a finite float >= 0, not %r" % (lr,))
        for name in tables if tables is not None else self._configs:
            if name not in self._configs:
                raise KeyError("no table %r in this collection" % name)
            if lr is None:
                self._lr.pop(name, None)
            else:
                self._lr[name] = float(lr)

    def learning_rate(self, table):
        """The lr updates of `table` use: set_learning_rate()'s, or the
        table's configured one (None: the optimizer's default)."""
        return self._lr.get(table, self._configs[table].lr)

    def _backward(self, batch, grads):
        parts = []
        for name, keys, g in zip(batch.names, batch.keys, grads):
            if g is None or not len(keys):
                continue
            parts.append((name, keys, g.detach().to(torch.float32)
                          .contiguous().numpy()))
        if self.update_mode == "step" or self._holding:
            self._held.append(parts)
        else:
            self._send(parts)

    @contextlib.contextmanager
    def no_sync(self):
        """Hold the updates of the backwards inside the block; the first
        backward (or step()) after it sends them with its own: the
        embedding side of DistributedDataParallel.no_sync() (use both:
        `with ddp.no_sync(), ebc.no_sync():`)."""
        self._holding += 1
        try:
            yield
        finally:
            self._holding -= 1

    def step(self):
        """Send the held updates (update_mode="step", or after no_sync()):
        every table's gradients since the last step, one optimizer step
        per distinct id (the node sums an id's gradients)."""
        self._send([])

    def _send(self, parts):
        held, self._held = self._held, []
        merged = {}
        for p in held + [parts]:
            for name, keys, g in p:
                merged.setdefault(name, []).append((keys, g))
        items = []
        for name in self._names:
            if name not in merged:
                continue
            ks = [k for k, _ in merged[name]]
            gs = [g for _, g in merged[name]]
            keys, g = ks[0], gs[0]
            if len(ks) > 1:     # held batches: one gradient per id, summed
                keys, inv = np.unique(np.concatenate(ks), return_inverse=True)
                g = np.zeros((len(keys), gs[0].shape[1]), dtype=np.float32)
                np.add.at(g, inv, np.concatenate(gs))
            if self.grad_hook is not None:
                g = self.grad_hook(name, keys, g)
                g = (g.detach().to(torch.float32).contiguous().numpy()
                     if isinstance(g, torch.Tensor)
                     else np.ascontiguousarray(g, dtype=np.float32))
            items.append((name, keys, g, self._lr.get(name)))
        if not items:
            return
        with self._cv:
            while self._seq - self._done >= _MAX_INFLIGHT:
                self._cv.wait()
            self._seq += 1
            seq = self._seq
            if self.staleness is not None:
                for name, keys, _, _ in items:
                    self._history.append((seq, name, keys))
        self._upool.submit(self._apply, seq, items)

    def _apply(self, seq, items):
        t0 = time.perf_counter()
        err = None
        created = 0
        try:
            st = self._client.update_multi(
                [(self._tables[n], k, g, lr, True)
                 for n, k, g, lr in items])
            for (n, k, _, _), s in zip(items, st):
                bad = s <= 0
                if bad.any():
                    raise KeyFailure("update", n, k[bad], s[bad])
                created += int((s == 2).sum())
        except BaseException as e:  # raised at the next forward/flush
            err = e
        dt = time.perf_counter() - t0
        with self._cv:
            self._done = seq
            if err is not None and self._error is None:
                self._error = err
            self.stats["updates"] += len(items)
            self.stats["update_batches"] += 1
            self.stats["update_keys"] += sum(len(i[1]) for i in items)
            self.stats["update_created_keys"] += created
            self.stats["update_s"] += dt
            self._cv.notify_all()

    def flush(self):
        """Wait for every update sent so far; raise the first that failed."""
        with self._lock:
            upto = self._seq
        self._wait_updates(upto)

    # ---- checkpoints (torch's state_dict flow) ----

    def checkpoint(self, path, **kw):
        """Send pending updates, then take a store checkpoint of this
        collection's tables into path (Client.checkpoint's keywords);
        state_dict() refers to it from then on. Returns its summary."""
        if self._held:
            self.step()
        self.flush()
        res = self._client.checkpoint(path, tables=list(self._names), **kw)
        self._ckpt = {"path": str(path), "id": res.get("id")}
        return res

    def get_extra_state(self):
        if self._ckpt is None:
            warnings.warn("recstore.EmbeddingBagCollection.state_dict(): "
                          "no checkpoint() taken, so the state holds the "
                          "table specs but not the rows (they stay in the "
                          "store)", stacklevel=3)
        return {"format": 1,
                "tables": {n: self._tables[n].spec() for n in self._names},
                "checkpoint": self._ckpt}

    def set_extra_state(self, state):
        if not isinstance(state, dict) or state.get("format") != 1:
            raise ValueError("not a recstore.EmbeddingBagCollection state")
        for name, spec in state["tables"].items():
            if name not in self._tables:
                raise ValueError("the state has table %r, this collection "
                                 "does not" % name)
            now = self._tables[name].spec(refresh=True)
            for field in ("dim", "dtype", "optimizer", "init", "init_seed"):
                if now.get(field) != spec.get(field):
                    raise ValueError("table %r: the state has %s=%r, the "
                                     "store %r" % (name, field,
                                                   spec.get(field),
                                                   now.get(field)))
        ck = state.get("checkpoint")
        if ck is None:
            return
        from .checkpoint import verify
        verify(ck["path"])
        if self.on_load == "restore":
            self.flush()
            self._client.restore(ck["path"], tables=list(state["tables"]))
        self._ckpt = dict(ck)

    def close(self):
        """Send held updates, wait for all of them, stop the threads."""
        with self._lock:
            for p in self._pending:
                p.future.cancel()
            self._pending = []
        try:
            if self._held:
                self.step()
            self.flush()
        finally:
            self._pool.shutdown(wait=True)
            self._upool.shutdown(wait=True)
