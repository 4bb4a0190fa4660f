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

import os
import sys
import unittest

import numpy as np
import torch

import recstore
from recstore.client import KeyFailure

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_common as tc  # noqa: E402


class FakeTable:
    def __init__(self, name, dim, optimizer, lr, eps, init_rows):
        self.name, self.dim = name, dim
        self.optimizer, self.lr, self.eps = optimizer, lr, eps
        self.rows = {}
        self.state = {}
        self.init_rows = init_rows      # key -> row of a created key
        self.gets = []                  # keys of every get, for the tests
        self.updates = []

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
                self.rows[k] = self.init_rows[k].copy()
            out[i] = self.rows[k]
        return out

    def put(self, keys, values):
        for k, v in zip(np.asarray(keys).tolist(), values):
            self.rows[k] = np.array(v, dtype=np.float32)
            self.state.pop(k, None)

    def update(self, keys, grads, lr=None):
        lr = self.lr if lr is None else lr
        keys = np.asarray(keys)
        self.updates.append(keys.copy())
        assert len(np.unique(keys)) == len(keys), "duplicates not folded"
        for k, g in zip(keys.tolist(), grads):
            w = self.rows[k]
            if self.optimizer == "sgd":
                w -= np.float32(lr) * g
            elif self.optimizer == "adagrad":
                G = self.state.setdefault(k, np.zeros(self.dim, np.float32))
                G += g * g
                w -= np.float32(lr) * g / (np.sqrt(G) + np.float32(self.eps))
            else:
                raise NotImplementedError(self.optimizer)


class FakeClient:
    def __init__(self, init_rows):
        self.tables = {}
        self.init_rows = init_rows

    def create_table(self, name, dim, **kw):
        if name not in self.tables:
            self.tables[name] = FakeTable(name, dim, kw["optimizer"],
                                          kw.get("lr", 0.01),
                                          kw.get("eps", 1e-10),
                                          self.init_rows[name])

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
        # two features share table t0: one fetch of their distinct ids
        t0 = fake.tables["t0"]
        ids = torch.cat([b.feature(f)[0] for f in spec["tables"]["t0"]["features"]])
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
            ebc._pending.future.result()
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

    def test_staleness_none_keeps_prefetched_rows(self):
        ebc = recstore.EmbeddingBagCollection(self.fake, tc.configs(self.spec),
                                              staleness=None)
        ebc.prefetch(self.bs[0])
        self.step(ebc, self.bs[0], self.bs[1])
        out = ebc(self.bs[1])
        self.assertEqual(ebc.stats["refetched_keys"], 0)
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
        with self.assertRaisesRegex(ValueError, "unknown"):
            ebc(recstore.JaggedFeatures(F + ["nope"],
                                        torch.zeros(0, dtype=torch.int64),
                                        lengths=torch.zeros(len(F) + 1,
                                                            dtype=torch.int64)))
        with self.assertRaisesRegex(TypeError, "JaggedFeatures"):
            ebc({"f0": torch.tensor([1])})
        with self.assertRaisesRegex(TypeError, "int64"):
            recstore.JaggedFeatures(["a"], torch.tensor([1], dtype=torch.int32),
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


if __name__ == "__main__":
    unittest.main(verbosity=2)
