"""The Python binding against a memory node over Soft-RoCE.

One process (torch's import is slow in the emulated guest) that starts
tools/recstore-server and checks:

  1. the same model trained N steps twice from the same start, once with its
     embeddings in the store and once with torch.nn.EmbeddingBag and the
     matching torch optimizer: losses, final rows and dense weights agree
     within 1e-5 (SGD and Adagrad, sum and mean pooling; row-wise Adagrad
     against FBGEMM's formula and Adam against a per-row-step reference);
  2. prefetch with the default staleness policy gives the same result as
     no prefetch;
  3. the trainer's data path: one lookup call per batch, rows read one-
     sided, RPC only for first-time ids, eval writes nothing, admission and
     eviction tables train, spec mismatch, state_dict with a checkpoint;
     two trainer processes on one store: both losses fall and every update
     of both is applied (a counter table, SGD lr 1, unit gradients); two
     DDP ranks accumulating under no_sync();
  4. a client used after fork() raises in the child; examples/dlrm.py,
     small, lowers its loss and beats the frequency baseline's AUC, with
     and without a row cache;
  4b. the row cache (RowCache): DLRM-shaped steps with an exact cache give
     the losses and store rows of an uncached run bit for bit, hit after
     16-byte probes that never find a row changed (a single trainer's own
     updates refresh its copies) and save READ bytes; with staleness 1
     they hit without probes and post fewer READs;
  5. a checkpoint and an export of a table, read back without the store
     (CheckpointReader), restored after a drop bit for bit, and a damaged
     one refused;
  6. bad input (dtype, non-contiguous, offsets out of range, unknown table,
     missing keys) raises clear exceptions, and after the node is killed a
     call raises recstore.Error instead of crashing.

Usage: test_python_rxe.py BUILD_DIR [CLASS...] (exit 77 without an RDMA
device; CLASS: run only those test classes, e.g. RowCache).
"""

import multiprocessing as mp
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

if not os.environ.get("RS_RDMA_DEV") or not os.environ.get("RS_RDMA_IP"):
    print("skip: no RDMA device (RS_RDMA_DEV, RS_RDMA_IP)")
    sys.exit(77)

t_import = time.monotonic()
import numpy as np  # noqa: E402
import torch  # noqa: E402

import recstore  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_common as tc  # noqa: E402

print("import torch + recstore: %.1f s" % (time.monotonic() - t_import),
      flush=True)
BUILD = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else "build"
NODE = {}
CKPT_ROOT = tempfile.mkdtemp(prefix="rs-py-ckpt-")


def start_node():
    log = tempfile.NamedTemporaryFile("w+", prefix="rs-py-node-",
                                      suffix=".log", delete=False)
    cfg = os.path.join(CKPT_ROOT, "node.json")
    with open(cfg, "w") as f:
        f.write('{"checkpoint_dir": "%s"}\n' % CKPT_ROOT)
    p = subprocess.Popen([os.path.join(BUILD, "recstore-server"),
                          "-c", cfg,
                          "--listen", os.environ["RS_RDMA_IP"] + ":0",
                          "--workers", "2"],
                         stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        with open(log.name) as f:
            for line in f:
                if "listening on " in line:
                    NODE.update(proc=p, log=log.name,
                                addr=line.split("listening on ")[1].strip())
                    return
        if p.poll() is not None:
            break
        time.sleep(0.1)
    with open(log.name) as f:
        sys.exit("node did not start:\n" + f.read())


def client(**kw):
    return recstore.Client(NODE["addr"], device=os.environ["RS_RDMA_IP"],
                           **kw)


class Equivalence(unittest.TestCase):
    """Store-backed training against torch's own, step by step."""

    @classmethod
    def setUpClass(cls):
        cls.c = client()

    @classmethod
    def tearDownClass(cls):
        cls.c.close()

    def run_case(self, optimizer, pooling, weighted=False, steps=5,
                 prefetch=False, lr_fn=None, cache=None):
        torch.manual_seed(0)
        spec = tc.small_spec(pooling=pooling, optimizer=optimizer)
        prefix = "%s_%s_%d_%d_%d_%d_" % (optimizer, pooling, weighted,
                                        prefetch, lr_fn is not None,
                                        cache is not None)
        ref = tc.ReferenceModel(spec, weighted)
        store = tc.StoreModel(spec, self.c, dense_from=ref, weighted=weighted,
                              prefix=prefix, cache=cache)
        data = tc.batches(spec, steps=steps, weighted=weighted, seed=1)
        l_ref = tc.train(ref, data, ref.optimizers(), lr_fn)
        if prefetch:
            l_store = tc.train_prefetch(store, data, store.optimizers())
        else:
            l_store = tc.train(store, data, store.optimizers(), lr_fn)
        np.testing.assert_allclose(l_store, l_ref, rtol=0, atol=1e-5)
        for name, (keys, rows) in tc.store_rows(self.c, spec, prefix).items():
            np.testing.assert_allclose(rows, ref.table_rows(name, keys),
                                       rtol=0, atol=1e-5, err_msg=name)
        tc.assert_dense_equal(self, store, ref)
        st = store.ebc.stats
        self.assertEqual(st["updates"], steps * len(spec["tables"]))
        # every row was put first: all read one-sided, none created by RPC
        self.assertEqual(st["init_rpc_keys"], 0)
        self.assertEqual(st["read_keys"], st["lookup_keys"])
        # one lookup call per batch for all tables, and one more for the
        # ids a batch must read again (its lookup overlapped the update
        # that touched them, or its prefetch came before it)
        self.assertEqual(st["lookups"], steps + st["second_reads"])
        return store

    def test_sgd_sum(self):
        self.run_case("sgd", "sum")

    def test_sgd_mean(self):
        self.run_case("sgd", "mean")

    def test_sgd_weighted(self):
        self.run_case("sgd", "sum", weighted=True)

    def test_adagrad_sum(self):
        self.run_case("adagrad", "sum")

    def test_adagrad_mean(self):
        self.run_case("adagrad", "mean")

    def test_rowwise_adagrad(self):
        self.run_case("rowwise_adagrad", "sum")

    def test_adam(self):
        self.run_case("adam", "mean")

    def test_lr_schedule(self):
        # per-step learning rates (an LR scheduler) sent with each UPDATE
        self.run_case("adam", "sum", lr_fn=lambda i: 0.02 * 0.6 ** i)

    def test_prefetch_same_result(self):
        store = self.run_case("adagrad", "sum", prefetch=True)
        self.assertGreater(store.ebc.stats["prefetched"], 0)

    def test_row_cache_exact(self):
        # the same steps as torch's with the row cache on (exact probes):
        # rows came from the cache after probes, none found changed
        store = self.run_case("adagrad", "sum",
                              cache={"cache_bytes": 1 << 20})
        cs = store.ebc.cache_stats()
        self.assertGreater(cs["hits"], 0)
        self.assertGreater(cs["probes"], 0)
        self.assertEqual(cs["probe_misses"], 0)


def trainer(addr, dev, rank, steps, q):
    """One data-parallel trainer process: its own client and model."""
    try:
        c = recstore.Client(addr, device=dev)
        spec = tc.small_spec(optimizer="adagrad")
        torch.manual_seed(rank)
        ebc = recstore.EmbeddingBagCollection(c, tc.configs(spec, "dp_"))
        head = torch.nn.Linear(20, 1)
        opt = torch.optim.SGD(head.parameters(), lr=0.1)
        counter = c.table("dp_counter")
        ones = np.ones((4, 4), dtype=np.float32)
        keys = np.arange(4, dtype=np.uint64)
        lossf = torch.nn.BCEWithLogitsLoss()
        losses = []
        rng = np.random.default_rng(100 + rank)
        for i in range(steps):
            jf, labels = tc.signal_batch(spec, rng)
            opt.zero_grad()
            loss = lossf(head(ebc(jf).values()).squeeze(1), labels)
            loss.backward()
            opt.step()
            counter.update(keys, ones)
            losses.append(loss.item())
        ebc.close()
        c.close()
        q.put((rank, losses, None))
    except BaseException as e:  # report, never hang the parent
        q.put((rank, None, repr(e)))


def ddp_trainer(addr, dev, rank, steps, initfile, q):
    """One DDP rank: a dense head wrapped in DistributedDataParallel
    (gloo), embeddings in the store; every second step accumulates under
    ddp.no_sync() and ebc.no_sync(). Reports the head's weights and the
    ebc's update batches."""
    try:
        import torch.distributed as dist
        dist.init_process_group("gloo", init_method="file://" + initfile,
                                rank=rank, world_size=2)
        c = recstore.Client(addr, device=dev)
        spec = tc.small_spec(optimizer="sgd")
        ebc = recstore.EmbeddingBagCollection(c, tc.configs(spec, "ddp_"))
        torch.manual_seed(0)
        head = torch.nn.parallel.DistributedDataParallel(
            torch.nn.Linear(20, 1))
        opt = torch.optim.SGD(head.parameters(), lr=0.1)
        lossf = torch.nn.BCEWithLogitsLoss()
        rng = np.random.default_rng(200 + rank)
        for i in range(steps):
            jf, labels = tc.signal_batch(spec, rng)
            if i % 2 == 0:      # accumulate: nothing synced, nothing sent
                with head.no_sync(), ebc.no_sync():
                    lossf(head(ebc(jf).values()).squeeze(1),
                          labels).backward()
                continue
            lossf(head(ebc(jf).values()).squeeze(1), labels).backward()
            opt.step()
            opt.zero_grad()
        ebc.close()
        w = head.module.weight.detach().numpy().copy()
        q.put((rank, (w, ebc.stats["update_batches"]), None))
        c.close()
        dist.destroy_process_group()
    except BaseException as e:  # report, never hang the parent
        q.put((rank, None, repr(e)))


class TwoTrainers(unittest.TestCase):
    def test_ddp_no_sync(self):
        steps = 8
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(["numpy", "torch", "recstore"])
        q = ctx.Queue()
        initfile = os.path.join(CKPT_ROOT, "ddp-init")
        ps = [ctx.Process(target=ddp_trainer,
                          args=(NODE["addr"], os.environ["RS_RDMA_IP"], r,
                                steps, initfile, q)) for r in range(2)]
        for p in ps:
            p.start()
        res = [q.get(timeout=500) for _ in ps]
        for p in ps:
            p.join(60)
        for rank, out, err in res:
            self.assertIsNone(err, "rank %d: %s" % (rank, err))
        (_, (w0, b0), _), (_, (w1, b1), _) = sorted(res, key=lambda r: r[0])
        # DDP kept the ranks' dense weights equal; the embedding updates of
        # the no_sync steps went with the next synced backward
        np.testing.assert_array_equal(w0, w1)
        self.assertEqual((b0, b1), (steps // 2, steps // 2))

    def test_two_processes(self):
        steps = 30
        with client() as c:
            c.create_table("dp_counter", 4, optimizer="sgd", lr=1.0,
                           capacity=1024)
            c.table("dp_counter").put(np.arange(4, dtype=np.uint64),
                                      np.zeros((4, 4), dtype=np.float32))
        # forkserver: the trainers fork from a server process that never
        # opened verbs (a child must not inherit this process's device
        # contexts), and that imported torch once for both (the import
        # takes minutes in an emulated guest)
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(["numpy", "torch", "recstore"])
        q = ctx.Queue()
        ps = [ctx.Process(target=trainer,
                          args=(NODE["addr"], os.environ["RS_RDMA_IP"], r,
                                steps, q)) for r in range(2)]
        for p in ps:
            p.start()
        res = [q.get(timeout=500) for _ in ps]
        for p in ps:
            p.join(60)
        for rank, losses, err in res:
            self.assertIsNone(err, "trainer %d: %s" % (rank, err))
            first, last = np.mean(losses[:8]), np.mean(losses[-8:])
            print("trainer %d: loss %.4f -> %.4f" % (rank, first, last))
            self.assertLess(last, first)
        with client() as c:
            rows = c.table("dp_counter").get(np.arange(4, dtype=np.uint64))
        # every update of both trainers applied exactly once
        np.testing.assert_array_equal(rows, np.full((4, 4), -2.0 * steps,
                                                    dtype=np.float32))


class Example(unittest.TestCase):
    """examples/dlrm.py, small: its loss falls and its AUC beats the
    frequency baseline."""

    def test_dlrm(self):
        sys.path.insert(0, os.path.join(os.path.dirname(
            os.path.abspath(__file__)), "..", "..", "examples"))
        import dlrm
        h = dlrm.main(["--nodes", NODE["addr"], "--device",
                       os.environ["RS_RDMA_IP"], "--epochs", "2",
                       "--steps", "15", "--eval", "2048", "--no-progress",
                       "--prefix", "ex_"])
        self.assertEqual(len(h), 2)
        self.assertLess(h[-1]["train_loss"], h[0]["train_loss"])
        self.assertGreater(h[-1]["auc"], h[-1]["baseline_auc"] + 0.05)
        # the row cache is on by default (64 MiB, exact): hot rows are
        # served after probes, and this single trainer's own updates keep
        # every copy current
        rc = h[-1]["row_cache"]
        self.assertGreater(rc["hits"], 0)
        self.assertEqual(rc["probe_misses"], 0)
        h0 = dlrm.main(["--nodes", NODE["addr"], "--device",
                        os.environ["RS_RDMA_IP"], "--epochs", "1",
                        "--steps", "2", "--eval", "256", "--no-progress",
                        "--prefix", "ex_", "--row-cache-mb", "0"])
        self.assertEqual(h0[-1]["row_cache"]["hits"], 0)  # turned off

    def test_dlrm_row_cache(self):
        sys.path.insert(0, os.path.join(os.path.dirname(
            os.path.abspath(__file__)), "..", "..", "examples"))
        import dlrm
        stages = os.path.join(CKPT_ROOT, "dlrm-stages.txt")
        h = dlrm.main(["--nodes", NODE["addr"], "--device",
                       os.environ["RS_RDMA_IP"], "--epochs", "1",
                       "--steps", "8", "--eval", "512", "--no-progress",
                       "--prefix", "ex_", "--row-cache-mb", "4",
                       "--stats-file", stages, "--stats-interval-ms", "1"])
        rc = h[-1]["row_cache"]
        self.assertGreater(rc["hits"], 0)
        self.assertGreater(rc["probes"], 0)
        self.assertEqual(rc["probe_misses"], 0)
        with open(stages) as f:
            lines = [ln.split() for ln in f if " trainer cache " in ln]
        self.assertTrue(lines)
        self.assertEqual(sum(int(w[3].split("=")[1]) for w in lines),
                         rc["hits"])


class Checkpoints(unittest.TestCase):
    N = 500

    def test_checkpoint_export_restore(self):
        c = client()
        c.create_table("ck_ada", 4, optimizer="adagrad", lr=0.1,
                       capacity=2048, exist_ok=True)
        t = c.table("ck_ada")
        keys = np.arange(self.N, dtype=np.uint64) * 7919
        t.put(keys, np.random.default_rng(1).standard_normal(
            (self.N, 4)).astype(np.float32))
        t.update(keys, np.full((self.N, 4), 0.5, np.float32))
        want = t.get(keys)
        phases = []
        full = os.path.join(CKPT_ROOT, "full")
        rep = c.checkpoint(full, tables=["ck_ada"],
                           progress=lambda p: phases.append(p["phase"]))
        self.assertEqual((rep["rows"], rep["tables"], rep["with_state"]),
                         (self.N, 1, True))
        self.assertIn("done", phases)
        self.assertEqual(recstore.verify(full)["rows"], self.N)
        with recstore.CheckpointReader(full) as r:
            (info,) = r.tables()
            self.assertEqual((info["name"], info["dim"]), ("ck_ada", 4))
            self.assertEqual(info["state_floats"], 4)
            k, rows, st = r.read_all("ck_ada", state=True)
        order = np.argsort(k)
        np.testing.assert_array_equal(k[order], keys)
        np.testing.assert_array_equal(rows[order], want)
        # adagrad's accumulator after one step of 0.5: 0.25 per element
        np.testing.assert_array_equal(st, np.full((self.N, 4), 0.25,
                                                  np.float32))
        exp = os.path.join(CKPT_ROOT, "export")
        rep = c.checkpoint(exp, tables=["ck_ada"], export=True)
        self.assertFalse(rep["with_state"])
        with recstore.CheckpointReader(exp) as r:
            self.assertEqual(r.tables()[0]["state_floats"], 0)
            n = 0
            for k, rows in r.rows("ck_ada", batch=128):
                self.assertLessEqual(len(k), 128)
                np.testing.assert_array_equal(rows, t.get(k))
                n += len(k)
            self.assertEqual(n, self.N)
            with self.assertRaisesRegex(ValueError, "no optimizer state"):
                next(r.rows("ck_ada", state=True))
        # dropped, restored: the same rows, and the same next step
        c.drop_table("ck_ada")
        rep = c.restore(full)
        self.assertEqual(rep["rows"], self.N)
        t = c.table("ck_ada")
        np.testing.assert_array_equal(t.get(keys), want)
        # a damaged part is refused, naming the file
        bad = os.path.join(CKPT_ROOT, "bad")
        subprocess.run(["cp", "-r", full, bad], check=True)
        part = sorted(f for f in os.listdir(bad) if f.endswith(".rsck"))[0]
        with open(os.path.join(bad, part), "r+b") as f:
            f.seek(os.path.getsize(os.path.join(bad, part)) // 2)
            b = f.read(1)
            f.seek(-1, 1)
            f.write(bytes([b[0] ^ 0x20]))
        with self.assertRaises(recstore.Error) as cm:
            c.restore(bad)
        self.assertEqual(cm.exception.code, recstore.E_CORRUPT)
        self.assertIn(part, str(cm.exception))
        c.close()


class Growth(unittest.TestCase):
    """A table that grows (max_capacity): filled past its capacity through
    put, which the node answers RS_E_BUSY while it grows (the client
    resends), and grown by command (grow_table)."""

    def test_grow(self):
        c = client()
        c.create_table("grow_t", 4, capacity=1024, max_capacity=8192,
                       exist_ok=True)
        t = c.table("grow_t")
        keys = np.arange(3000, dtype=np.uint64)
        vals = np.repeat(keys.astype(np.float32)[:, None], 4, axis=1)
        for i in range(0, len(keys), 500):
            t.put(keys[i:i + 500], vals[i:i + 500])
        cap = {x["name"]: x["capacity"] for x in c.tables()}["grow_t"]
        self.assertGreaterEqual(cap, 4096)   # grew at least twice
        np.testing.assert_array_equal(t.get(keys), vals)
        c.grow_table("grow_t", capacity=16384)   # past max_capacity: asked
        cap = {x["name"]: x["capacity"] for x in c.tables()}["grow_t"]
        self.assertEqual(cap, 16384)
        np.testing.assert_array_equal(c.table("grow_t").get(keys), vals)
        with self.assertRaises(recstore.Error) as cm:
            c.grow_table("no_such_table")
        self.assertEqual(cm.exception.code, recstore.E_NOTFOUND)
        c.drop_table("grow_t")
        c.close()


class TrainerPath(unittest.TestCase):
    """The collection's data path on a node: one-sided lookups, eval that
    writes nothing, tables with admission and eviction that train, spec
    checks, state_dict with a checkpoint."""

    @classmethod
    def setUpClass(cls):
        cls.c = client()

    @classmethod
    def tearDownClass(cls):
        cls.c.close()

    def rows(self, name):
        return {d["name"]: d["rows"] for d in self.c.tables()}[name]

    def test_lookups_one_sided_eval_writes_nothing(self):
        spec = tc.small_spec()
        cfgs = tc.configs(spec, "tp_")
        for cf in cfgs:
            cf.init, cf.init_a, cf.init_seed = "uniform", 0.05, 3
        ebc = recstore.EmbeddingBagCollection(self.c, cfgs)
        data = tc.batches(spec, steps=3, weighted=False, seed=12)
        ebc.eval()
        with torch.no_grad():
            ev = ebc(data[0][0]).values()
        for name in spec["tables"]:
            self.assertEqual(self.rows("tp_" + name), 0, name)
        self.assertGreater(ebc.stats["init_local_keys"], 0)
        ebc.train()
        before = self.c.stats()
        tr = ebc(data[0][0])
        after = self.c.stats()
        # the rows eval computed are the ones the node creates
        self.assertTrue(torch.equal(ev, tr.values().detach()))
        created = ebc.stats["init_rpc_keys"]
        self.assertEqual(after["get_or_init_keys"] - before["get_or_init_keys"],
                         created)
        tr.values().sum().backward()
        # the same ids again: all one-sided READs, no RPC
        before = self.c.stats()
        ebc(data[0][0])
        after = self.c.stats()
        self.assertEqual(ebc.stats["init_rpc_keys"], created)
        self.assertEqual(after["get_or_init_keys"], before["get_or_init_keys"])
        self.assertEqual(after["rpc_keys"], before["rpc_keys"])
        self.assertGreater(after["onesided_keys"], before["onesided_keys"])
        ebc.close()

    def test_bucket_images_one_read(self):
        """A trainer whose location cache is empty (here: none at all)
        gets existing ids in one READ each, through the bucket images its
        collection prefetched (docs/client.md, "Bucket images")."""
        spec = tc.small_spec()
        cfgs = tc.configs(spec, "ti_")
        data = tc.batches(spec, steps=2, weighted=False, seed=21)
        ebc = recstore.EmbeddingBagCollection(self.c, cfgs)
        ebc(data[0][0]).values().sum().backward()   # creates the rows
        ebc.flush()
        ebc.close()
        c2 = client(cache_entries=0)
        try:
            ebc2 = recstore.EmbeddingBagCollection(c2, tc.configs(spec, "ti_"),
                                                   create=False)
            self.assertGreater(ebc2.index_images, 0)
            ebc2.eval()
            before = c2.stats()
            with torch.no_grad():
                ev = ebc2(data[0][0]).values()
            after = c2.stats()
            keys = after["onesided_keys"] - before["onesided_keys"]
            self.assertGreater(keys, 0)
            self.assertEqual(after["rpc_keys"], before["rpc_keys"])
            self.assertEqual(after["bucket_cache_hits"]
                             - before["bucket_cache_hits"], keys)
            self.assertEqual(after["reads_posted"] - before["reads_posted"],
                             keys)
            self.assertEqual(ebc2.stats["init_local_keys"], 0)
            self.assertTrue(torch.isfinite(ev).all())
            ebc2.close()
            # disabled: no prefetch, nothing raised by the collection
            c3 = client(bucket_cache_bytes=0)
            try:
                self.assertEqual(c3.stats()["bucket_cache_capacity"], 0)
                ebc3 = recstore.EmbeddingBagCollection(
                    c3, tc.configs(spec, "ti_"), create=False)
                self.assertEqual(ebc3.index_images, 0)
                ebc3.close()
                with self.assertRaises(recstore.Error):
                    c3.table("ti_" + next(iter(spec["tables"]))
                             ).prefetch_index()
            finally:
                c3.close()
        finally:
            c2.close()

    def test_admission_and_eviction_tables_train(self):
        self.c.create_table("tp_adm", 4, optimizer="sgd", lr=0.1,
                            capacity=1024, evict="lru", max_rows=1000,
                            admit_after=3, exist_ok=True)
        self.c.create_table("tp_evl", 4, optimizer="adagrad", lr=0.1,
                            capacity=1024, evict="lru", max_rows=16,
                            exist_ok=True)
        cfgs = [recstore.EmbeddingBagConfig("tp_adm", 4, ["a"], lr=0.1),
                recstore.EmbeddingBagConfig("tp_evl", 4, ["e"],
                                            optimizer="adagrad", lr=0.1)]
        ebc = recstore.EmbeddingBagCollection(self.c, cfgs, create=False)
        rng = np.random.default_rng(5)
        for step in range(12):
            ids = np.concatenate([rng.integers(0, 8, 16),
                                  rng.integers(0, 200, 16)]).astype(np.int64)
            jf = recstore.JaggedFeatures(["a", "e"], torch.from_numpy(ids),
                                         lengths=torch.ones(32, dtype=torch.int64))
            ebc(jf).values().pow(2).sum().backward()
        ebc.close()
        # admitted after 3 sightings: the 8 hot ids have rows; the capped
        # table never holds more than 16
        self.assertEqual(self.rows("tp_adm"), 8)
        self.assertLessEqual(self.rows("tp_evl"), 16)
        self.assertGreater(ebc.stats["update_keys"], 0)

    def test_spec_mismatch_and_state_dict(self):
        spec = tc.small_spec(optimizer="adagrad")
        ebc = recstore.EmbeddingBagCollection(self.c, tc.configs(spec, "sd_"))
        data = tc.batches(spec, steps=2, weighted=False, seed=13)
        for jf, _, _ in data:
            ebc(jf).values().sum().backward()
        bad = tc.configs(spec, "sd_")
        bad[1].lr = 0.5
        with self.assertRaisesRegex(ValueError, "'sd_t1' exists on the store "
                                    "with lr="):
            recstore.EmbeddingBagCollection(self.c, bad)
        path = os.path.join(CKPT_ROOT, "sd_ckpt")
        ebc.checkpoint(path)
        sd = ebc.state_dict()
        keys = np.unique(torch.cat([data[0][0].feature(f)[0] for f in
                                    spec["tables"]["t0"]["features"]])
                         .numpy()).astype(np.uint64)
        saved = self.c.table("sd_t0").get(keys)
        ebc(data[1][0]).values().sum().backward()   # after the checkpoint
        ebc.flush()
        self.assertFalse(np.array_equal(self.c.table("sd_t0").get(keys),
                                        saved))
        ebc2 = recstore.EmbeddingBagCollection(self.c, tc.configs(spec, "sd_"),
                                               on_load="restore")
        ebc2.load_state_dict(sd)
        np.testing.assert_array_equal(self.c.table("sd_t0").get(keys), saved)
        ebc.close()
        ebc2.close()


def dlrm_shaped_run(prefix, cache_bytes=0, cache_staleness=None, steps=6):
    """A few DLRM-shaped steps on a client of its own: 4 tables of dim 16,
    one id per feature and sample, Zipf-like ids, a dense top over the
    pooled rows, Adagrad on the node; its tables are dropped at the end.
    Returns (losses, top weights, rows of
    every id of every table, cache_stats(), client stats)."""
    n_tab, dim, ids, batch = 4, 16, 300, 128
    c = client()
    for t in range(n_tab):
        c.drop_table("%s%d" % (prefix, t), missing_ok=True)
    ebc = recstore.EmbeddingBagCollection(c, [recstore.EmbeddingBagConfig(
        "%s%d" % (prefix, t), dim, ["c%d" % t], optimizer="adagrad",
        lr=0.05, init="uniform", init_a=0.05, init_seed=t,
        num_embeddings=1024, cache_bytes=cache_bytes,
        cache_staleness=cache_staleness) for t in range(n_tab)])
    torch.manual_seed(3)
    top = torch.nn.Linear(n_tab * dim, 1)
    opt = torch.optim.SGD(top.parameters(), lr=0.1)
    g = np.random.default_rng(4)
    p = 1.0 / (np.arange(ids) + 5.0)
    losses = []
    for _ in range(steps):
        ranks = g.choice(ids, size=(n_tab, batch), p=p / p.sum())
        jf = recstore.JaggedFeatures(
            ["c%d" % t for t in range(n_tab)],
            torch.from_numpy(ranks.reshape(-1).astype(np.int64)),
            lengths=torch.ones(n_tab * batch, dtype=torch.int64))
        y = torch.from_numpy((ranks[0] < ids // 4).astype(np.float32))
        opt.zero_grad()
        loss = torch.nn.functional.binary_cross_entropy_with_logits(
            top(ebc(jf).values()).squeeze(1), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    ebc.flush()
    keys = np.arange(ids, dtype=np.uint64)
    rows = []
    for t in range(n_tab):
        r, st = c.table("%s%d" % (prefix, t)).get_with_status(keys)
        rows.append(np.where((st > 0)[:, None], r, np.nan))
    cache, stats = ebc.cache_stats(), c.stats()
    ebc.close()
    for t in range(n_tab):      # a node holds 64 tables: leave none behind
        c.drop_table("%s%d" % (prefix, t))
    c.close()
    return (np.array(losses), top.weight.detach().numpy().copy(),
            np.stack(rows), cache, stats)


class RowCache(unittest.TestCase):
    """The trainer-side row cache through the collection: exact mode
    changes no result and saves READ bytes; bounded staleness skips the
    probes."""

    @classmethod
    def setUpClass(cls):
        cls.plain = dlrm_shaped_run("rc_plain_")
        cls.exact = dlrm_shaped_run("rc_exact_", cache_bytes=1 << 20)

    def test_exact_same_result_as_uncached(self):
        l0, w0, rows0, c0, _ = self.plain
        l1, w1, rows1, c1, _ = self.exact
        self.assertEqual(c0["hits"], 0)
        np.testing.assert_array_equal(l1, l0)       # bit for bit
        np.testing.assert_array_equal(w1, w0)
        np.testing.assert_array_equal(rows1, rows0)

    def test_exact_hits_after_probes(self):
        _, _, _, cs, st = self.exact
        print("exact: %s" % cs)
        self.assertGreater(cs["hits"], 0)
        self.assertGreater(cs["probes"], 0)
        self.assertEqual(cs["stale_hits"], 0)
        # one trainer: its own update replies keep every copy current
        self.assertEqual(cs["probe_misses"], 0)
        self.assertGreater(cs["update_rows"], 0)
        self.assertGreater(cs["bytes_saved"], 0)
        self.assertGreater(cs["bytes"], 0)
        self.assertEqual(st["row_cache_hits"], cs["hits"])

    def test_staleness_skips_reads(self):
        l1, _, _, c1, s1 = self.exact
        l2, _, rows2, c2, s2 = dlrm_shaped_run("rc_stale_", 1 << 20, 1)
        print("staleness 1: %s" % c2)
        self.assertGreater(c2["stale_hits"], 0)
        self.assertLess(s2["reads_posted"], s1["reads_posted"])
        self.assertGreater(c2["bytes_saved"], c1["bytes_saved"])
        # every row this trainer updated came back in the reply: the
        # losses are still those of the exact run
        np.testing.assert_array_equal(l2, l1)


class Misuse(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.c = client(timeout_ms=3000)
        cls.c.create_table("bad_t", 4, capacity=1024, exist_ok=True)
        cls.t = cls.c.table("bad_t")
        cls.t.put(np.arange(3, dtype=np.uint64), np.ones((3, 4), np.float32))

    def test_after_fork(self):
        pid = os.fork()
        if pid == 0:
            try:
                self.c.table("bad_t")
                os._exit(1)
            except RuntimeError as e:
                os._exit(0 if "fork" in str(e) else 2)
            except BaseException:
                os._exit(3)
        _, st = os.waitpid(pid, 0)
        self.assertEqual(os.waitstatus_to_exitcode(st), 0)
        # the parent's client still works
        self.assertEqual(self.t.get(np.arange(3, dtype=np.uint64)).shape,
                         (3, 4))

    def test_bad_input(self):
        t = self.t
        with self.assertRaisesRegex(TypeError, "int64 or uint64"):
            t.get(np.array([1.0, 2.0]))
        with self.assertRaisesRegex(ValueError, "contiguous"):
            t.get(torch.arange(8)[::2])
        with self.assertRaisesRegex(TypeError, "float32"):
            t.update(np.arange(2), np.ones((2, 4), dtype=np.float64))
        with self.assertRaisesRegex(ValueError, "need"):
            t.update(np.arange(2), np.ones((3, 4), dtype=np.float32))
        with self.assertRaisesRegex(ValueError, "negative"):
            t.get(np.array([-5], dtype=np.int64))
        with self.assertRaises(recstore.Error) as cm:
            self.c.table("no_such_table")
        self.assertEqual(cm.exception.code, recstore.E_NOTFOUND)
        with self.assertRaises(recstore.KeyFailure) as kf:
            t.get(np.array([1, 12345], dtype=np.uint64))
        self.assertEqual(kf.exception.keys.tolist(), [12345])
        self.assertIn("12345 (missing)", str(kf.exception))
        rows, status = t.get_with_status(np.array([1, 12345], np.uint64))
        self.assertEqual(status.tolist(), [recstore.KEY_FOUND,
                                           recstore.KEY_MISSING])
        with self.assertRaisesRegex(ValueError, "out of range"):
            recstore.JaggedFeatures(["a"], torch.tensor([1, 2]),
                                    offsets=torch.tensor([0, 7]))
        with self.assertRaisesRegex(recstore.Error, "E_EXISTS|exists"):
            self.c.create_table("bad_t", 8)

    def test_eviction(self):
        # docs/eviction.md: a capped LRU table keeps at most max_rows
        with self.assertRaisesRegex(recstore.Error, "needs a policy"):
            self.c.create_table("ev_bad", 4, capacity=64, max_rows=8)
        with self.assertRaisesRegex(recstore.Error, "policy"):
            self.c.create_table("ev_bad", 4, capacity=64, evict="fifo")
        self.c.create_table("ev_t", 4, capacity=1024, evict="lru",
                            max_rows=16, exist_ok=True)
        t = self.c.table("ev_t")
        for k in range(40):
            t.get(np.array([k], np.uint64), init=True)
        rows = {d["name"]: d["rows"] for d in self.c.tables()}
        self.assertEqual(rows["ev_t"], 16)
        # the most recent keys are still there
        _, st = t.get_with_status(np.arange(36, 40, dtype=np.uint64))
        self.assertEqual(st.tolist(), [recstore.KEY_FOUND] * 4)

    def test_z_node_gone(self):  # runs last in this class
        NODE["proc"].send_signal(signal.SIGKILL)
        NODE["proc"].wait()
        t0 = time.monotonic()
        # the node's failure comes back per key (its keys' status carries
        # the connection error) or, for the call as a whole, as
        # recstore.Error: either way an exception that says what happened
        with self.assertRaises((recstore.Error, recstore.KeyFailure)) as cm:
            for _ in range(3):   # the first may still hit a cached location
                self.t.get(np.arange(3, dtype=np.uint64), rpc=True)
        e = cm.exception
        print("node gone: %s after %.1f s" % (e, time.monotonic() - t0))
        if isinstance(e, recstore.KeyFailure):
            self.assertEqual(sorted(e.keys.tolist()), [0, 1, 2])
            self.assertTrue((e.codes < 0).all())
        else:
            self.assertLess(e.code, 0)


if __name__ == "__main__":
    start_node()
    loader = unittest.defaultTestLoader
    # Misuse last: it ends by killing the node
    classes = (Equivalence, TrainerPath, RowCache, TwoTrainers, Example,
               Checkpoints, Misuse)
    only = sys.argv[2:]
    suite = unittest.TestSuite([loader.loadTestsFromTestCase(k)
                                for k in classes
                                if not only or k.__name__ in only])
    try:
        result = unittest.TextTestRunner(verbosity=2).run(suite)
    finally:
        if NODE["proc"].poll() is None:
            NODE["proc"].kill()
            NODE["proc"].wait()
    sys.exit(0 if result.wasSuccessful() else 1)
