"""EmbeddingBagCollection: pooled embedding lookups served by the store.

The conventions are torch.nn.EmbeddingBag's and TorchRec's
EmbeddingBagCollection: one config per table (name, dim, the features that
share it, pooling, optimizer and its hyper-parameters, initializer), a
JaggedFeatures batch in, one dense (B, sum of dims) tensor out with the
feature layout exposed.

Forward fetches each table's distinct keys of the batch once (missing keys
are created from the table's initializer on their node) and pools them with
torch.nn.functional.embedding_bag, so sum and mean pooling and per-sample
weights have torch's exact semantics. Backward folds the gradient of every
distinct key (the embedding_bag backward sums a key's occurrences) and sends
one UPDATE per distinct key per batch and table; the memory node runs the
table's optimizer. Dense parameters stay with torch's optimizers.

Prefetch. prefetch(next_batch) fetches the next batch's rows in a
background thread while the current batch computes (the native calls
release the GIL). Staleness policy (staleness=k, default 0): a prefetched
row may miss at most k of this trainer's own update batches that touched
its key after the prefetch was issued; rows that miss more are fetched
again at forward time. With the default 0 a trainer never reads a row
older than the last update it sent. staleness=None accepts prefetched rows
as they are.
"""

import concurrent.futures
import dataclasses
import threading
import time

import numpy as np
import torch
import torch.nn.functional as F

from .client import Table
from .jagged import JaggedFeatures


@dataclasses.dataclass
class EmbeddingBagConfig:
    name: str
    embedding_dim: int
    feature_names: list
    pooling: str = "sum"            # "sum" or "mean"
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


class PooledEmbeddings:
    """The forward's output: values() is (B, sum of dims); layout maps each
    feature to (column offset, dim), in feature_names() order."""

    def __init__(self, values, feature_names, layout):
        self._values = values
        self._names = feature_names
        self._layout = layout

    def values(self):
        return self._values

    def feature_names(self):
        return list(self._names)

    def layout(self):
        return dict(self._layout)

    def __getitem__(self, feature):
        off, dim = self._layout[feature]
        return self._values[:, off:off + dim]

    def to_dict(self):
        return {f: self[f] for f in self._names}


class _Lookup(torch.autograd.Function):
    """rows fetched from the store -> the same rows, with a backward that
    sends their folded gradient to the store as one UPDATE."""

    @staticmethod
    def forward(ctx, anchor, rows, ebc, table, keys):
        ctx.ebc = ebc
        ctx.table = table
        ctx.keys = keys
        return rows.view_as(rows)

    @staticmethod
    def backward(ctx, grad):
        ctx.ebc._send_update(ctx.table, ctx.keys, grad)
        return None, None, None, None, None


class _Prefetch:
    def __init__(self, features, seq, future):
        self.features = features
        self.seq = seq
        self.future = future


class EmbeddingBagCollection(torch.nn.Module):
    def __init__(self, client, tables, *, staleness=0, create=True):
        super().__init__()
        if staleness is not None and (not isinstance(staleness, int)
                                      or staleness < 0):
            raise ValueError("staleness must be None or an int >= 0")
        self._client = client
        self._configs = {}
        self._tables = {}
        self._feature_table = {}
        self.staleness = staleness
        names = []
        for cfg in tables:
            if cfg.name in self._configs:
                raise ValueError("table %r configured twice" % cfg.name)
            if cfg.pooling not in ("sum", "mean"):
                raise ValueError("table %r: pooling must be 'sum' or 'mean', "
                                 "not %r" % (cfg.name, cfg.pooling))
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
            self._tables[name] = t
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
        self._seq = 0               # update batches sent by this module
        self._history = []          # (seq, table, keys) since oldest prefetch
        self._pending = None
        self._lr = {}               # table -> this step's lr (set_learning_rate)
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="recstore-prefetch")
        self.stats = {"lookups": 0, "lookup_keys": 0, "updates": 0,
                      "update_keys": 0, "prefetched": 0, "refetched_keys": 0,
                      "lookup_s": 0.0, "update_s": 0.0}

    def _create_tables(self):
        for cfg in self._configs.values():
            kw = dict(optimizer=cfg.optimizer, init=cfg.init,
                      init_seed=cfg.init_seed, capacity=cfg.num_embeddings,
                      dtype=cfg.dtype,
                      decoupled_weight_decay=cfg.decoupled_weight_decay,
                      exist_ok=True)
            for k in ("lr", "eps", "beta1", "beta2", "weight_decay",
                      "initial_accumulator", "init_value", "init_a",
                      "init_std"):
                v = getattr(cfg, k)
                if v is not None:
                    kw[k] = v
            self._client.create_table(cfg.name, cfg.embedding_dim, **kw)

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

    # ---- lookups ----

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

    def _check_features(self, features):
        if not isinstance(features, JaggedFeatures):
            raise TypeError("features must be recstore.JaggedFeatures, not %s"
                            % type(features).__name__)
        have = set(features.keys())
        missing = [f for f in self._features if f not in have]
        unknown = [f for f in features.keys() if f not in self._layout]
        if missing or unknown:
            raise ValueError("batch features do not match the collection: "
                             "missing %s, unknown %s" % (missing, unknown))

    def _fetch(self, name, keys_np):
        t0 = time.perf_counter()
        rows = self._tables[name].get(keys_np, init=True)
        dt = time.perf_counter() - t0
        with self._lock:
            self.stats["lookups"] += 1
            self.stats["lookup_keys"] += len(keys_np)
            self.stats["lookup_s"] += dt
        return rows

    def _unique(self, features):
        """{table: (unique keys (numpy uint64), inverse, offsets, weights)}"""
        out = {}
        for name in self._configs:
            ids, offsets, weights = self._table_ids(features, name)
            uniq, inverse = torch.unique(ids, sorted=True, return_inverse=True)
            out[name] = (uniq.numpy().astype(np.uint64), inverse, offsets,
                         weights)
        return out

    def prefetch(self, features):
        """Start fetching the rows of `features` (the next batch) in the
        background; the forward of that same object uses them."""
        self._check_features(features)
        if self._pending is not None:
            self._pending.future.cancel()
        uniq = self._unique(features)
        with self._lock:
            seq = self._seq

        def job():
            return {n: (u[0], self._fetch(n, u[0]), u) for n, u in uniq.items()}

        self._pending = _Prefetch(features, seq,
                                  self._pool.submit(job))

    def _stale_keys(self, name, keys, since):
        """Keys of `keys` that this trainer updated in more than
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
            keep = self._pending.seq if self._pending is not None else self._seq
            self._history = [h for h in self._history if h[0] > keep]

    def forward(self, features):
        self._check_features(features)
        pre = None
        if self._pending is not None and self._pending.features is features:
            pre, self._pending = self._pending, None
            fetched = pre.future.result()
        b = features.batch_size()
        uniq = None if pre is not None else self._unique(features)
        per_feature = {}
        for name, cfg in self._configs.items():
            if pre is not None:
                keys, rows, (_, inverse, offsets, weights) = fetched[name]
                with self._lock:
                    self.stats["prefetched"] += 1
                if self.staleness is not None:
                    idx = self._stale_keys(name, keys, pre.seq)
                    if len(idx):
                        rows[idx] = self._fetch(name, keys[idx])
                        with self._lock:
                            self.stats["refetched_keys"] += len(idx)
            else:
                keys, inverse, offsets, weights = uniq[name]
                rows = self._fetch(name, keys)
            emb = _Lookup.apply(self._anchor, torch.from_numpy(rows), self,
                                name, keys)
            pooled = F.embedding_bag(inverse, emb, offsets, mode=cfg.pooling,
                                     per_sample_weights=weights,
                                     include_last_offset=True)
            pooled = pooled.view(len(cfg.feature_names), b,
                                 cfg.embedding_dim)
            for i, f in enumerate(cfg.feature_names):
                per_feature[f] = pooled[i]
        self._trim_history()
        values = torch.cat([per_feature[f] for f in self._features], dim=1)
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

    def _send_update(self, name, keys, grad):
        g = grad.detach().to(torch.float32).contiguous().numpy()
        t0 = time.perf_counter()
        self._tables[name].update(keys, g, lr=self._lr.get(name))
        dt = time.perf_counter() - t0
        with self._lock:
            self._seq += 1
            self._history.append((self._seq, name, keys))
            self.stats["updates"] += 1
            self.stats["update_keys"] += len(keys)
            self.stats["update_s"] += dt

    def close(self):
        self._pool.shutdown(wait=True)
