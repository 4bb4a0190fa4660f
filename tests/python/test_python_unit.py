"""Unit tests of the recstore Python package's logic, without an RDMA device.

The collection talks to tables through get(keys, init=True) and
update(keys, grads); here a FakeStore implements them in numpy with the
node's optimizer formulas (docs/optimizers.md), so that what the pure-Python
layer does (jagged inputs, folding duplicates, pooling, layout, prefetch
and its staleness policy, errors) is checked natively against
torch.nn.EmbeddingBag. tests/python/test_python_rxe.py proves the same
against a memory node over Soft-RoCE.

Run: PYTHONPATH=build/python python3 tests/python/test_python_unit.py
"""

import logging
import os
import sys
import tempfile
import threading
import unittest

import numpy as np
import torch

import recstore
from recstore.client import KeyFailure

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_common as tc  # noqa: E402


class FakeTable:
    def __init__(self, name, dim, optimizer, lr, eps, init_rows, kw=None):
        self.name, self.dim = name, dim
        self.kw = dict(kw or {})
        self.optimizer, self.lr, self.eps = optimizer, lr, eps
        self.rows = {}
        self.state = {}
        self._init = init_rows          # key -> row of a created key
        self.gets = []                  # keys of every get, for the tests
        self.updates = []
        self.row_cache = None           # (bytes, max_stale_steps) if set
        self.cached = {}                # key -> step its copy was taken

    def set_row_cache(self, nbytes, max_stale_steps=None):
        self.row_cache = (nbytes, max_stale_steps) if nbytes else None
        self.cached = {}

    def get(self, keys, init=False):
        keys = np.asarray(keys)
        self.gets.append(keys.copy())
        out = np.zeros((len(keys), self.dim), dtype=np.float32)
        for i, k in enumerate(keys.tolist()):
            if k not in self.rows:
                if not init:
                    raise KeyFailure("get", self.name,
                                     np.array([k], dtype=np.uint64),
                                     np.array([0], dtype=np.int32))
                self.rows[k] = self._init[k].copy()
            out[i] = self.rows[k]
        return out

    def get_with_status(self, keys, init=False):
        keys = np.asarray(keys)
        self.gets.append(keys.copy())
        out = np.zeros((len(keys), self.dim), dtype=np.float32)
        st = np.zeros(len(keys), dtype=np.int32)
        for i, k in enumerate(keys.tolist()):
            if k not in self.rows:
                if not init:
                    continue
                self.rows[k] = self._init[k].copy()
                st[i] = 2
            else:
                st[i] = 1
            out[i] = self.rows[k]
        return out, st

    def init_rows(self, keys):
        return np.stack([self._init[k].copy()
                         for k in np.asarray(keys).tolist()]).astype(
                             np.float32).reshape(len(keys), self.dim)

    def spec(self, refresh=False):
        d = {"dim": self.dim, "optimizer": self.optimizer, "lr": self.lr,
             "eps": self.eps, "dtype": "fp32", "init": "zeros",
             "init_seed": 0, "decoupled_weight_decay": False}
        d.update(self.kw)
        return d

    def put(self, keys, values):
        for k, v in zip(np.asarray(keys).tolist(), values):
            self.rows[k] = np.array(v, dtype=np.float32)
            self.state.pop(k, None)

    def update(self, keys, grads, lr=None, create=False):
        lr = self.lr if lr is None else lr
        keys = np.asarray(keys)
        self.updates.append(keys.copy())
        assert len(np.unique(keys)) == len(keys), "duplicates not folded"
        st = np.ones(len(keys), dtype=np.int32)
        for i, (k, g) in enumerate(zip(keys.tolist(), grads)):
            if k not in self.rows:
                if not create:
                    st[i] = 0
                    continue
                self.rows[k] = self._init[k].copy()
                st[i] = 2
            w = self.rows[k]
            if self.optimizer == "sgd":
                w -= np.float32(lr) * g
            elif self.optimizer == "adagrad":
                G = self.state.setdefault(k, np.zeros(self.dim, np.float32))
                G += g * g
                w -= np.float32(lr) * g / (np.sqrt(G) + np.float32(self.eps))
            else:
                raise NotImplementedError(self.optimizer)
        return st


class FakeClient:
    """A client over FakeTables. A table with a row cache counts what the
    library's cache would (client.h, rs_client_stats.row_cache_*): a key
    read before is a hit, after a probe (exact) or without one while its
    copy is at most max_stale_steps steps old; updates refresh copies."""

    ROW_BYTES = 64

    def __init__(self, init_rows):
        self.tables = {}
        self.init_rows = init_rows
        self.steps = 0
        self.counters = {"onesided_keys": 0, "reads_posted": 0,
                         "row_cache_hits": 0, "row_cache_stale_hits": 0,
                         "row_cache_probes": 0, "row_cache_probe_misses": 0,
                         "row_cache_fills": 0, "row_cache_update_rows": 0,
                         "row_cache_evictions": 0, "row_cache_rejects": 0,
                         "row_cache_invalidations": 0,
                         "row_cache_bytes_saved": 0}

    def step(self):
        self.steps += 1
        return self.steps

    def stats(self):
        d = dict(self.counters)
        d["row_cache_bytes"] = sum(len(t.cached) * self.ROW_BYTES
                                   for t in self.tables.values())
        return d

    def _count_get(self, t, keys, st):
        c = self.counters
        for k, s in zip(keys.tolist(), st.tolist()):
            if s != 1:      # missing, or created by GET_OR_INIT (an RPC)
                continue
            stamp = t.cached.get(k) if t.row_cache else None
            if stamp is None:
                c["onesided_keys"] += 1
                c["reads_posted"] += 1
                if t.row_cache:
                    t.cached[k] = self.steps
                    c["row_cache_fills"] += 1
                continue
            c["row_cache_hits"] += 1
            stale = t.row_cache[1]
            if stale is not None and self.steps - stamp <= stale:
                c["row_cache_stale_hits"] += 1
                c["row_cache_bytes_saved"] += self.ROW_BYTES
            else:
                c["onesided_keys"] += 1
                c["reads_posted"] += 1
                c["row_cache_probes"] += 1
                c["row_cache_bytes_saved"] += self.ROW_BYTES - 16

    def create_table(self, name, dim, **kw):
        if name not in self.tables:
            self.tables[name] = FakeTable(name, dim, kw["optimizer"],
                                          kw.get("lr", 0.01),
                                          kw.get("eps", 1e-10),
                                          self.init_rows[name], kw)
        self.multi_gets = getattr(self, "multi_gets", 0)

    def get_multi(self, items, init=False):
        self.multi_gets += 1
        out = []
        for t, keys, rows in items:
            r, st = t.get_with_status(keys, init=init)
            rows[st > 0] = r[st > 0]
            self._count_get(t, np.asarray(keys), st)
            out.append(st)
        return out

    def update_multi(self, items):
        out = []
        for t, k, g, lr, c in items:
            out.append(t.update(k, g, lr=lr, create=c))
            if t.row_cache:
                for key in np.asarray(k).tolist():
                    t.cached[key] = self.steps
                self.counters["row_cache_update_rows"] += len(k)
                self.counters["row_cache_fills"] += len(k)
        return out

    def table(self, name):
        if name not in self.tables:
            raise recstore.Error("open table: no table %r" % name)
        return self.tables[name]


class Training(unittest.TestCase):
    def run_case(self, optimizer, pooling, weighted, lr_fn=None):
        torch.manual_seed(0)
        spec = tc.small_spec(pooling=pooling, optimizer=optimizer)
        ref = tc.ReferenceModel(spec, weighted)
        fake = FakeClient(ref.initial_rows())
        store = tc.StoreModel(spec, fake, dense_from=ref, weighted=weighted)
        batches = tc.batches(spec, steps=6, weighted=weighted, seed=1)
        l_ref = tc.train(ref, batches, ref.optimizers(), lr_fn)
        l_store = tc.train(store, batches, store.optimizers(), lr_fn)
        np.testing.assert_allclose(l_store, l_ref, rtol=0, atol=1e-5)
        for name, (keys, rows) in tc.store_rows(fake, spec).items():
            np.testing.assert_allclose(rows, ref.table_rows(name, keys),
                                       rtol=0, atol=1e-5)
        tc.assert_dense_equal(self, store, ref)
        # one UPDATE per distinct key per batch and table
        for t in fake.tables.values():
            self.assertEqual(len(t.updates), len(batches))

    def test_sgd_sum(self):
        self.run_case("sgd", "sum", False)

    def test_sgd_mean(self):
        self.run_case("sgd", "mean", False)

    def test_sgd_weighted(self):
        self.run_case("sgd", "sum", True)

    def test_adagrad_sum(self):
        self.run_case("adagrad", "sum", False)

    def test_adagrad_mean(self):
        self.run_case("adagrad", "mean", False)

    def test_lr_schedule(self):
        # a decaying schedule, set per step on both sides
        self.run_case("sgd", "sum", False, lr_fn=lambda i: 0.2 * 0.7 ** i)
        self.run_case("adagrad", "sum", False, lr_fn=lambda i: 0.1 / (1 + i))


class SpecFields(unittest.TestCase):
    """create_table's hyper-parameter keywords are the rows of the
    library's field table (recstore._native.SPEC_FIELDS), and a config
    hands every one of them to create_table."""

    def test_rows(self):
        rows = recstore._native.SPEC_FIELDS
        names = [r[0] for r in rows]
        for n in ("lr", "eps", "beta1", "beta2", "weight_decay",
                  "initial_accumulator", "init_value", "init_a",
                  "init_std", "init_seed"):
            self.assertIn(n, names)
        fields = recstore.EmbeddingBagConfig.__dataclass_fields__
        for name, typ, defaults, lo, hi, kinds in rows:
            self.assertIn(name, fields)
            self.assertIn(typ, ("float", "int"))
            self.assertEqual(len(defaults), 4)
            self.assertTrue(kinds)
            if lo is not None and hi is not None:
                self.assertLess(lo, hi)
        lr = [r for r in rows if r[0] == "lr"][0]
        self.assertAlmostEqual(lr[2]["adam"], 0.001, places=6)
        self.assertEqual(lr[3], 0.0)    # lr > 0
        self.assertIsNone(lr[4])

    def test_config_passes_every_float(self):
        spec = tc.small_spec()
        fake = FakeClient(tc.ReferenceModel(spec, False).initial_rows())
        floats = [r[0] for r in recstore._native.SPEC_FIELDS
                  if r[1] == "float"]
        cfg = tc.configs(spec)[0]
        for i, n in enumerate(floats):
            setattr(cfg, n, 0.125 * (i + 1))
        recstore.EmbeddingBagCollection(fake, [cfg])
        kw = fake.tables[cfg.name].kw
        for i, n in enumerate(floats):
            self.assertEqual(kw.get(n), 0.125 * (i + 1), n)


class DefaultPort(unittest.TestCase):
    """recstore.DEFAULT_PORT is the library's default port, exported by
    the extension (src/common/defaults.h) rather than written again."""

    def test_from_the_extension(self):
        self.assertEqual(recstore.DEFAULT_PORT, recstore._native.DEFAULT_PORT)
        self.assertIsInstance(recstore.DEFAULT_PORT, int)
        self.assertTrue(0 < recstore.DEFAULT_PORT < 65536)
        self.assertIn("DEFAULT_PORT", recstore.__all__)


class Layout(unittest.TestCase):
    def test_layout_and_shared_table(self):
        spec = tc.small_spec()
        fake = FakeClient(tc.ReferenceModel(spec, False).initial_rows())
        ebc = recstore.EmbeddingBagCollection(fake, tc.configs(spec))
        b = tc.batches(spec, steps=1, weighted=False, seed=3)[0][0]
        out = ebc(b)
        self.assertEqual(ebc.feature_names(), spec["features"])
        self.assertEqual(out.values().shape,
                         (spec["batch"], sum(d for _, d in ebc.layout().values())))
        # one read for all tables; two features share table t0: one fetch
        # of their distinct ids (the missing ones created in the same
        # call: get_multi(init=True))
        t0 = fake.tables["t0"]
        ids = torch.cat([b.feature(f)[0] for f in spec["tables"]["t0"]["features"]])
        self.assertEqual(fake.multi_gets, 1)
        self.assertEqual(len(t0.gets), 1)
        self.assertEqual(sorted(t0.gets[0].tolist()),
                         sorted(set(ids.tolist())))
        for f, (off, d) in ebc.layout().items():
            self.assertTrue(torch.equal(out[f], out.values()[:, off:off + d]))

    def test_empty_bags(self):
        spec = tc.small_spec()
        fake = FakeClient(tc.ReferenceModel(spec, False).initial_rows())
        ebc = recstore.EmbeddingBagCollection(fake, tc.configs(spec))
        nf, b = len(spec["features"]), spec["batch"]
        jf = recstore.JaggedFeatures(spec["features"],
                                     torch.zeros(0, dtype=torch.int64),
                                     lengths=torch.zeros(nf * b,
                                                         dtype=torch.int64))
        out = ebc(jf)
        self.assertTrue(torch.equal(out.values(), torch.zeros_like(out.values())))
        out.values().sum().backward()       # nothing to update, no error


class Prefetch(unittest.TestCase):
    def setUp(self):
        self.spec = tc.small_spec()
        self.fake = FakeClient(tc.ReferenceModel(self.spec, False).initial_rows())
        self.bs = [x[0] for x in tc.batches(self.spec, steps=3, weighted=False,
                                            seed=5, overlap=True)]

    def step(self, ebc, cur, nxt):
        out = ebc(cur)
        if nxt is not None:
            ebc.prefetch(nxt)
            # the prefetch reads before this batch's update: its rows of
            # the keys both batches share are then certainly stale
            ebc._pending[-1].future.result()
        out.values().sum().backward()

    def test_staleness_zero_refetches_updated_keys(self):
        ebc = recstore.EmbeddingBagCollection(self.fake, tc.configs(self.spec))
        ebc.prefetch(self.bs[0])
        self.step(ebc, self.bs[0], self.bs[1])
        gets_before = {n: len(t.gets) for n, t in self.fake.tables.items()}
        out = ebc(self.bs[1])     # the prefetch missed bs[0]'s update
        self.assertGreater(ebc.stats["refetched_keys"], 0)
        # one more get per table (the refetch of the keys bs[0] updated),
        # and the rows used are the current ones: compare with a plain read
        for name, t in self.fake.tables.items():
            self.assertEqual(len(t.gets), gets_before[name] + 1)
        fresh = recstore.EmbeddingBagCollection(self.fake, tc.configs(self.spec))
        self.assertTrue(torch.equal(out.values(), fresh(self.bs[1]).values()))

    def test_lookup_overlaps_update(self):
        """A lookup reads the keys the update in flight does not touch
        while it is in flight, and the others after it: the rows equal a
        read after the update (staleness 0), and the first read really
        happened during the update."""
        gate = threading.Event()
        during = []

        class Slow(FakeClient):
            def update_multi(self, items):
                gate.wait(30)
                return super().update_multi(items)

            def get_multi(self, items, **kw):
                during.append(not gate.is_set())
                return super().get_multi(items, **kw)

        fake = Slow(tc.ReferenceModel(self.spec, False).initial_rows())
        ebc = recstore.EmbeddingBagCollection(fake, tc.configs(self.spec))
        ebc(self.bs[0]).values().sum().backward()  # its update waits
        threading.Timer(0.3, gate.set).start()
        out = ebc(self.bs[1])
        self.assertTrue(during[1], "the lookup waited for the update")
        self.assertFalse(during[-1], "the keys it touched were not read "
                         "after it")
        self.assertEqual(ebc.stats["overlapped_lookups"], 1)
        self.assertGreater(ebc.stats["waited_keys"], 0)
        self.assertEqual(ebc.stats["second_reads"], 1)
        ebc.flush()
        fresh = recstore.EmbeddingBagCollection(fake, tc.configs(self.spec))
        self.assertTrue(torch.equal(out.values(), fresh(self.bs[1]).values()))
        ebc.close()

    def test_staleness_none_keeps_prefetched_rows(self):
        ebc = recstore.EmbeddingBagCollection(self.fake, tc.configs(self.spec),
                                              staleness=None)
        ebc.prefetch(self.bs[0])
        self.step(ebc, self.bs[0], self.bs[1])
        out = ebc(self.bs[1])
        self.assertEqual(ebc.stats["refetched_keys"], 0)
        ebc.flush()
        fresh = recstore.EmbeddingBagCollection(self.fake, tc.configs(self.spec))
        # bs[1] shares keys with bs[0] (overlap=True): its prefetched rows
        # predate bs[0]'s update, so they differ from a fresh read
        self.assertFalse(torch.equal(out.values(), fresh(self.bs[1]).values()))


class BadInput(unittest.TestCase):
    def test_errors(self):
        spec = tc.small_spec()
        fake = FakeClient(tc.ReferenceModel(spec, False).initial_rows())
        ebc = recstore.EmbeddingBagCollection(fake, tc.configs(spec))
        F = spec["features"]
        with self.assertRaisesRegex(ValueError, "missing"):
            ebc(recstore.JaggedFeatures(F[1:],
                                        torch.zeros(0, dtype=torch.int64),
                                        lengths=torch.zeros(len(F) - 1,
                                                            dtype=torch.int64)))
        with self.assertRaisesRegex(TypeError, "JaggedFeatures"):
            ebc({"f0": torch.tensor([1])})
        with self.assertRaisesRegex(TypeError, "int64 or int32"):
            recstore.JaggedFeatures(["a"], torch.tensor([1.0]),
                                    lengths=torch.tensor([1]))
        with self.assertRaisesRegex(ValueError, "negative"):
            recstore.JaggedFeatures(["a"], torch.tensor([-1]),
                                    lengths=torch.tensor([1]))
        with self.assertRaisesRegex(ValueError, "out of range"):
            recstore.JaggedFeatures(["a"], torch.tensor([1, 2]),
                                    offsets=torch.tensor([0, 5]))
        with self.assertRaisesRegex(ValueError, "sum to"):
            recstore.JaggedFeatures(["a"], torch.tensor([1, 2]),
                                    lengths=torch.tensor([1]))
        with self.assertRaisesRegex(ValueError, "one-dimensional"):
            recstore.JaggedFeatures(["a"], torch.tensor([[1, 2]]),
                                    lengths=torch.tensor([2]))
        with self.assertRaisesRegex(ValueError, "weights need sum"):
            cfgs = tc.configs(spec)
            for c in cfgs:
                c.pooling = "mean"
            ebc2 = recstore.EmbeddingBagCollection(fake, cfgs)
            b = tc.batches(spec, steps=1, weighted=True, seed=2)[0][0]
            ebc2(b)
        with self.assertRaisesRegex(ValueError, "feature 'f0' is on tables"):
            cfgs = tc.configs(spec)
            cfgs[1].feature_names = cfgs[0].feature_names[:1]
            recstore.EmbeddingBagCollection(fake, cfgs)

    def test_table_call_checks(self):
        # the Table wrapper's checks run before the native call
        class Native:
            name, dim = "t", 4

            def get(self, *a, **k):
                raise AssertionError("must not be reached")

        t = recstore.Table(Native())
        with self.assertRaisesRegex(TypeError, "int64 or uint64"):
            t.get(np.array([1, 2], dtype=np.int32))
        with self.assertRaisesRegex(ValueError, "contiguous"):
            t.get(torch.arange(10)[::2])
        with self.assertRaisesRegex(TypeError, "float32"):
            t.update(np.array([1], dtype=np.int64), np.zeros((1, 4)))
        with self.assertRaisesRegex(TypeError, "numpy array or a torch"):
            t.get([1, 2, 3])

    def test_key_failure_names_keys(self):
        e = KeyFailure("get", "t", np.array([5, 9], dtype=np.uint64),
                       np.array([0, recstore.E_OVERFLOW], dtype=np.int32))
        self.assertIn("5 (missing)", str(e))
        self.assertIn("9 (", str(e))
        self.assertEqual(e.keys.tolist(), [5, 9])

    def test_checkpoint_reader_refuses(self):
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            with self.assertRaises(recstore.Error) as cm:
                recstore.CheckpointReader(d)   # no MANIFEST
            self.assertIn("MANIFEST", str(cm.exception))
            with open(os.path.join(d, "MANIFEST"), "w") as f:
                f.write("recstore-checkpoint 1 xxh64=0000000000000000\n{}")
            with self.assertRaises(recstore.Error) as cm:
                recstore.verify(d)
            self.assertEqual(cm.exception.code, recstore.E_CORRUPT)
        with self.assertRaises(TypeError):
            recstore.CheckpointReader(5)


def _cached_configs(spec, nbytes, staleness, only=None):
    cfgs = tc.configs(spec)
    for cf in cfgs:
        if only is None or cf.name in only:
            cf.cache_bytes, cf.cache_staleness = nbytes, staleness
    return cfgs


class LogLines(unittest.TestCase):
    """The library's log lines reach logging's "recstore" logger."""

    def test_library_warning_reaches_logging(self):
        # a secret file others can read: the client config warns about it
        # before the connect fails (here: no device, no node)
        fd, path = tempfile.mkstemp(prefix="rs-py-secret-")
        try:
            os.write(fd, b"0123456789abcdef0123\n")
            os.close(fd)
            os.chmod(path, 0o644)
            with self.assertLogs("recstore", level="WARNING") as cm:
                with self.assertRaises(recstore.Error):
                    recstore.Client("127.0.0.1:1", key_id=1,
                                    secret_file=path, timeout_ms=100)
        finally:
            os.unlink(path)
        self.assertEqual(len(cm.records), 1)
        r = cm.records[0]
        self.assertEqual(r.levelno, logging.WARNING)
        self.assertEqual(r.getMessage(), "warning: secret file %s may be "
                         "read by other users (chmod 600 it)" % path)
        self.assertTrue(r.rs_file.endswith("src/client/config.c"), r.rs_file)
        self.assertEqual(r.rs_func, "rs_client_config_set_credentials_file")


class RowCache(unittest.TestCase):
    """The config's cache_bytes/cache_staleness reach each table's handle,
    the step clock advances once per training forward, cache_stats()
    reports the client's counters since the collection opened."""

    def setUp(self):
        self.spec = tc.small_spec()
        self.fake = FakeClient(tc.ReferenceModel(self.spec, False)
                               .initial_rows())
        self.bs = [x[0] for x in tc.batches(self.spec, steps=4,
                                            weighted=False, seed=9,
                                            overlap=True)]

    def test_config_reaches_tables(self):
        ebc = recstore.EmbeddingBagCollection(
            self.fake, _cached_configs(self.spec, 1 << 20, 2, only={"t0"}))
        self.assertEqual(self.fake.tables["t0"].row_cache, (1 << 20, 2))
        self.assertIsNone(self.fake.tables["t1"].row_cache)
        self.assertEqual(ebc.cached_tables(), {"t0": (1 << 20, 2)})
        ebc.close()
        spec, fake, ebc = _fresh()
        self.assertTrue(all(t.row_cache is None
                            for t in fake.tables.values()))
        self.assertEqual(ebc.cached_tables(), {})
        ebc.close()

    def test_bad_cache_options(self):
        for field, v in (("cache_bytes", -1), ("cache_bytes", 1.5),
                         ("cache_bytes", None), ("cache_staleness", -1),
                         ("cache_staleness", True), ("cache_staleness", "1")):
            cfgs = tc.configs(self.spec)
            setattr(cfgs[1], field, v)
            with self.assertRaisesRegex(ValueError, "t1.*%s" % field):
                recstore.EmbeddingBagCollection(self.fake, cfgs)

    def test_one_step_per_training_forward(self):
        ebc = recstore.EmbeddingBagCollection(
            self.fake, _cached_configs(self.spec, 1 << 20, None))
        ebc(self.bs[0]).values().sum().backward()
        self.assertEqual(self.fake.steps, 1)
        ebc.prefetch(self.bs[1])        # a prefetched batch: one step too
        ebc(self.bs[1]).values().sum().backward()
        self.assertEqual(self.fake.steps, 2)
        ebc.eval()                      # evaluation: no step
        ebc(self.bs[2])
        ebc.train()
        with torch.no_grad():
            ebc(self.bs[2])
        self.assertEqual(self.fake.steps, 2)
        self.assertEqual(ebc.cache_stats()["steps"], 2)
        ebc.close()

    def test_exact_stats_since_open(self):
        self.fake.counters["row_cache_hits"] = 100   # an earlier collection
        self.fake.counters["reads_posted"] = 50
        ebc = recstore.EmbeddingBagCollection(
            self.fake, _cached_configs(self.spec, 1 << 20, None))
        self.assertEqual(ebc.cache_stats()["hits"], 0)
        self.assertEqual(ebc.cache_stats()["reads_posted"], 0)
        ebc(self.bs[0]).values().sum().backward()
        ebc.flush()
        first = ebc.cache_stats()
        self.assertEqual(first["hits"], 0)     # first sightings: created
        self.assertGreater(first["update_rows"], 0)
        self.assertEqual(first["update_rows"], first["fills"])
        out = ebc(self.bs[0])
        cs = ebc.cache_stats()
        keys = sum(len(np.unique(self.bs[0].feature(f)[0].numpy()))
                   for f in ("f2",)) + len(np.unique(np.concatenate(
                       [self.bs[0].feature(f)[0].numpy()
                        for f in ("f0", "f1")])))
        self.assertEqual(cs["hits"], keys)          # every key, probed
        self.assertEqual(cs["probes"], keys)
        self.assertEqual(cs["stale_hits"], 0)
        self.assertEqual(cs["bytes_saved"], keys * (FakeClient.ROW_BYTES - 16))
        self.assertEqual(cs["bytes"], keys * FakeClient.ROW_BYTES)
        self.assertEqual(cs["reads_posted"], keys)   # the probes
        # the cache changes no result: a collection without one agrees
        fresh = recstore.EmbeddingBagCollection(self.fake,
                                                tc.configs(self.spec))
        self.assertTrue(torch.equal(out.values().detach(),
                                    fresh(self.bs[0]).values().detach()))
        ebc.close()
        fresh.close()

    def test_staleness_stats(self):
        ebc = recstore.EmbeddingBagCollection(
            self.fake, _cached_configs(self.spec, 1 << 20, 1))
        for b in self.bs:
            ebc(b).values().sum().backward()
        ebc.flush()
        cs = ebc.cache_stats()
        self.assertGreater(cs["stale_hits"], 0)
        # a copy older than 1 step is probed (the fake's probes all hit)
        self.assertEqual(cs["hits"], cs["stale_hits"] + cs["probes"])
        self.assertLess(cs["reads_posted"], ebc.stats["lookup_keys"])
        self.assertEqual(cs["steps"], len(self.bs))
        ebc.close()

    def test_no_cache_stats_are_zero(self):
        spec, fake, ebc = _fresh()
        ebc(self.bs[0]).values().sum().backward()
        cs = ebc.cache_stats()
        self.assertEqual(cs.pop("steps"), 1)
        self.assertEqual(cs, {k: 0 for k in cs})
        ebc.close()


def _fresh(spec=None, **kw):
    spec = spec or tc.small_spec()
    fake = FakeClient(tc.ReferenceModel(spec, False).initial_rows())
    return spec, fake, recstore.EmbeddingBagCollection(fake, tc.configs(spec),
                                                       **kw)


class TrainingLoop(unittest.TestCase):
    """Evaluation, TorchRec inputs and outputs, accumulation, a second
    backward, checkpoints in state_dict, fx, bounded prefetch history."""

    def test_eval_and_no_grad_write_nothing(self):
        spec, fake, ebc = _fresh()
        b = tc.batches(spec, steps=1, weighted=False, seed=3)[0][0]
        ebc.eval()
        out = ebc(b)
        with torch.no_grad():
            ebc.train()
            out2 = ebc(b)
        self.assertEqual(sum(len(t.rows) for t in fake.tables.values()), 0)
        self.assertGreater(ebc.stats["init_local_keys"], 0)
        self.assertEqual(ebc.stats["init_rpc_keys"], 0)
        self.assertFalse(out.values().requires_grad)
        self.assertTrue(torch.equal(out.values(), out2.values()))
        # the rows used are the initializer's: training creates the same
        out3 = ebc(b)
        self.assertGreater(ebc.stats["init_rpc_keys"], 0)
        self.assertTrue(torch.equal(out.values(), out3.values().detach()))

    def test_kjt_stand_in(self):
        spec, fake, ebc = _fresh()
        b = tc.batches(spec, steps=1, weighted=True, seed=4)[0][0]

        class KJT:   # TorchRec's KeyedJaggedTensor interface, one extra key
            def keys(self):
                return b.keys() + ["extra"]

            def values(self):
                return torch.cat([b.values(), torch.tensor([7, 8])]).to(
                    torch.int32)

            def lengths(self):
                return torch.cat([b.lengths(), torch.zeros(
                    b.batch_size(), dtype=torch.int64)]).index_put(
                        (torch.tensor([len(b.lengths())]),),
                        torch.tensor([2])).to(torch.int32)

            def weights_or_none(self):
                return torch.cat([b.weights(), torch.ones(2)])

        kt = ebc(KJT())
        ref = ebc(b)
        self.assertTrue(torch.equal(kt.values(), ref.values()))
        self.assertEqual(kt.keys(), spec["features"])
        dims = [spec["tables"]["t0"]["dim"]] * 2 + [spec["tables"]["t1"]["dim"]]
        self.assertEqual(kt.length_per_key(), dims)
        self.assertEqual(kt.offset_per_key(), [0, 8, 16, 20])
        self.assertEqual(sorted(kt.to_dict()), sorted(spec["features"]))

    def test_from_torchrec_config(self):
        import enum

        class PoolingType(enum.Enum):
            SUM = "SUM"
            MEAN = "MEAN"

        class TRC:
            name, embedding_dim, num_embeddings = "t", 16, 10000
            feature_names = ["a", "b"]
            pooling = PoolingType.MEAN

        c = recstore.EmbeddingBagConfig.from_torchrec(TRC(), optimizer="adagrad")
        self.assertEqual((c.pooling, c.init, c.optimizer), ("mean", "uniform",
                                                          "adagrad"))
        self.assertAlmostEqual(c.init_a, 0.01)

    def test_second_backward_applies_once(self):
        spec, fake, ebc = _fresh()
        b = tc.batches(spec, steps=1, weighted=False, seed=3)[0][0]
        loss = ebc(b).values().sum()
        loss.backward(retain_graph=True)
        loss.backward()
        ebc.flush()
        self.assertEqual([len(t.updates) for t in fake.tables.values()], [1, 1])

    def test_accumulation_step_mode(self):
        spec, fake, ebc = _fresh(update_mode="step")
        spec2, fake2, ebc2 = _fresh()
        bs = tc.batches(spec, steps=2, weighted=False, seed=6, overlap=True)
        for jf, _, _ in bs:
            ebc(jf).values().sum().backward()
        self.assertEqual(sum(len(t.updates) for t in fake.tables.values()), 0)
        ebc.step()
        ebc.flush()
        # one step with the summed gradients: as one batch of both
        both = recstore.JaggedFeatures.from_dict({
            f: (torch.cat([bs[0][0].feature(f)[0], bs[1][0].feature(f)[0]]),
                torch.cat([bs[0][0].feature(f)[1].diff(),
                           bs[1][0].feature(f)[1].diff()]))
            for f in spec["features"]})
        ebc2(both).values().sum().backward()
        ebc2.flush()
        for n in fake.tables:
            self.assertEqual(len(fake.tables[n].updates), 1)
            for k, v in fake2.tables[n].rows.items():
                np.testing.assert_allclose(fake.tables[n].rows[k], v,
                                           rtol=0, atol=1e-6)

    def test_no_sync_holds_updates(self):
        spec, fake, ebc = _fresh()
        bs = tc.batches(spec, steps=2, weighted=False, seed=6)
        with ebc.no_sync():
            ebc(bs[0][0]).values().sum().backward()
        ebc.flush()
        self.assertEqual(sum(len(t.updates) for t in fake.tables.values()), 0)
        ebc(bs[1][0]).values().sum().backward()
        ebc.flush()
        self.assertEqual([len(t.updates) for t in fake.tables.values()], [1, 1])

    def test_grad_hook(self):
        spec, fake, ebc = _fresh(grad_hook=lambda t, k, g: g * 0)
        b = tc.batches(spec, steps=1, weighted=False, seed=3)[0][0]
        ebc(b)   # creates the rows
        before = {n: {k: v.copy() for k, v in t.rows.items()}
                  for n, t in fake.tables.items()}
        ebc(b).values().sum().backward()
        ebc.flush()
        for n, t in fake.tables.items():
            for k, v in t.rows.items():
                np.testing.assert_array_equal(v, before[n][k])

    def test_update_of_missing_key_is_created(self):
        spec, fake, ebc = _fresh()
        b = tc.batches(spec, steps=1, weighted=False, seed=3)[0][0]
        out = ebc(b)
        for t in fake.tables.values():   # evicted between forward and update
            t.rows.clear()
        out.values().sum().backward()
        ebc.flush()
        self.assertGreater(ebc.stats["update_created_keys"], 0)

    def test_spec_mismatch_raises(self):
        spec, fake, ebc = _fresh()
        cfgs = tc.configs(spec)
        cfgs[1].lr = 0.5
        with self.assertRaisesRegex(ValueError, "'t1' exists on the store "
                                    "with lr=0.1"):
            recstore.EmbeddingBagCollection(fake, cfgs)
        cfgs = tc.configs(spec)
        cfgs[0].optimizer = "adam"
        with self.assertRaisesRegex(ValueError, "optimizer='sgd'"):
            recstore.EmbeddingBagCollection(fake, cfgs)

    def test_state_dict_carries_specs(self):
        spec, fake, ebc = _fresh()
        with self.assertWarnsRegex(UserWarning, "no checkpoint"):
            sd = ebc.state_dict()
        self.assertEqual(sorted(sd["_extra_state"]["tables"]), ["t0", "t1"])
        _, _, ebc2 = _fresh()
        ebc2.tables = None
        ebc.load_state_dict(sd)
        sd["_extra_state"]["tables"]["t0"]["dim"] = 99
        with self.assertRaisesRegex(ValueError, "dim=99"):
            ebc.load_state_dict(sd)

    def test_fx_trace(self):
        spec, fake, ebc = _fresh()

        class M(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.ebc = ebc

            def forward(self, jf):
                return self.ebc(jf).values() * 2

        m = M()
        gm = torch.fx.symbolic_trace(m)
        self.assertIn("recstore_lookup", str(gm.graph))
        b = tc.batches(spec, steps=1, weighted=False, seed=3)[0][0]
        self.assertTrue(torch.equal(gm(b), m(b)))

    def test_unconsumed_prefetch_history_bounded(self):
        spec, fake, ebc = _fresh(spec=dict(tc.small_spec(), batch=2))
        bs = [x[0] for x in tc.batches(spec, steps=4, weighted=False, seed=8)]
        ebc.prefetch(bs[3])        # never forwarded
        longest = 0
        for i in range(10000):
            ebc(bs[i % 3]).values().sum().backward()
            longest = max(longest, len(ebc._history))
        ebc.flush()
        self.assertLessEqual(longest, 2 * 66)
        self.assertEqual(ebc.stats["prefetch_dropped"], 1)

    def test_staleness_bound_with_prefetch(self):
        """Rows count this trainer's updates (SGD lr 1, gradient -1 per
        bag): with staleness=k, no row used may miss more than k of them."""
        for k in (0, 1, 2):
            spec = dict(tc.small_spec(), batch=4, lr=1.0)
            fake = FakeClient({n: np.zeros((t["rows"], t["dim"]), np.float32)
                               for n, t in spec["tables"].items()})
            ebc = recstore.EmbeddingBagCollection(fake, tc.configs(spec),
                                                  staleness=k)
            bs = [x[0] for x in tc.batches(spec, steps=12, weighted=False,
                                           seed=9, overlap=True)]
            sent = {}   # (table, key) -> update batches that touched it
            worst = 0
            ebc.prefetch(bs[0])
            for i, jf in enumerate(bs):
                out = ebc(jf)
                if i + 1 < len(bs):
                    ebc.prefetch(bs[i + 1])
                    # read before this batch's update: stale for k > 0
                    ebc._pending[-1].future.result()
                for f in spec["features"]:
                    tname = next(n for n, t in spec["tables"].items()
                                 if f in t["features"])
                    v, o, _ = jf.feature(f)
                    col = out[f][:, 0].detach()
                    for bag in range(jf.batch_size()):
                        ids = v[o[bag]:o[bag + 1]].tolist()
                        if len(ids) != 1:
                            continue
                        have = float(col[bag])
                        want = sent.get((tname, ids[0]), 0)
                        worst = max(worst, want - have)
                (-out.values()).sum().backward()
                for n, t in spec["tables"].items():
                    ks = set(torch.cat([jf.feature(f)[0]
                                        for f in t["features"]]).tolist())
                    for key in ks:
                        sent[(n, key)] = sent.get((n, key), 0) + 1
            ebc.close()
            self.assertLessEqual(worst, k, "staleness %d" % k)
            if k:   # stale rows were really used (the case this checks)
                self.assertGreater(worst, 0, "no stale row was ever used")


class _Samples(torch.utils.data.Dataset):
    """Samples as a DataLoader's dataset yields them: ({feature: ids},
    dense, label), from tc.batches' batches."""

    def __init__(self, spec, batches):
        self.items = []
        for jf, dense, labels in batches:
            for b in range(jf.batch_size()):
                d = {}
                for f in spec["features"]:
                    v, o, _ = jf.feature(f)
                    d[f] = v[o[b]:o[b + 1]].numpy()
                self.items.append((d, dense[b], labels[b]))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


class Pipeline(unittest.TestCase):
    def test_dataloader_workers_and_prefetch_depth(self):
        spec = tc.small_spec()
        data = tc.batches(spec, steps=8, weighted=False, seed=21,
                          overlap=True)
        ref = tc.ReferenceModel(spec, False)
        loader = torch.utils.data.DataLoader(
            _Samples(spec, data), batch_size=spec["batch"], num_workers=2,
            collate_fn=recstore.collate_jagged)
        got = list(loader)
        self.assertEqual(len(got), len(data))
        for (jf, dense, labels), (jf0, dense0, labels0) in zip(got, data):
            self.assertTrue(torch.equal(jf.values(), jf0.values()))
            self.assertTrue(torch.equal(jf.offsets(), jf0.offsets()))
            self.assertTrue(torch.equal(dense, dense0))
        losses = {}
        for depth in (None, 1, 3):
            fake = FakeClient(ref.initial_rows())
            store = tc.StoreModel(spec, fake, dense_from=ref, weighted=False)
            opt = store.optimizers()
            lossf = torch.nn.BCEWithLogitsLoss()
            it = (loader if depth is None else
                  recstore.TrainPipeline(store.ebc, loader, depth=depth))
            ls = []
            for jf, dense, labels in it:
                for o in opt:
                    o.zero_grad()
                loss = lossf(store(jf, dense), labels)
                loss.backward()
                for o in opt:
                    o.step()
                ls.append(loss.item())
            store.ebc.close()
            losses[depth] = ls
            if depth is not None:
                self.assertEqual(store.ebc.stats["prefetched"], len(data))
                self.assertGreater(store.ebc.stats["refetched_keys"], 0)
        # staleness 0: prefetching k ahead changes nothing
        np.testing.assert_allclose(losses[1], losses[None], rtol=0, atol=1e-6)
        np.testing.assert_allclose(losses[3], losses[None], rtol=0, atol=1e-6)

    def test_collate_errors(self):
        with self.assertRaisesRegex(ValueError, "different"):
            recstore.collate_jagged([{"a": [1]}, {"b": [2]}])
        with self.assertRaisesRegex(TypeError, "feature"):
            recstore.collate_jagged([[1, 2]])
        jf = recstore.collate_jagged([{"a": [1, 2], "b": []},
                                      {"a": [3], "b": [4]}])
        self.assertEqual(jf.lengths().tolist(), [2, 1, 0, 1])


if __name__ == "__main__":
    unittest.main(verbosity=2)
