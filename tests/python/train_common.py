"""A small recommendation model trained twice: with its embeddings in the
store (recstore.EmbeddingBagCollection) and with torch.nn.EmbeddingBag plus
the matching torch optimizer. Shared by test_python_unit.py (a numpy fake of
the store) and test_python_rxe.py (a memory node over Soft-RoCE)."""

import copy

import numpy as np
import torch

import recstore


def small_spec(pooling="sum", optimizer="sgd"):
    return {
        "tables": {
            "t0": {"dim": 8, "features": ["f0", "f1"], "rows": 40},
            "t1": {"dim": 4, "features": ["f2"], "rows": 25},
        },
        "features": ["f0", "f1", "f2"],
        "batch": 16,
        "pooling": pooling,
        "optimizer": optimizer,
        "lr": {"sgd": 0.1, "adam": 0.01}.get(optimizer, 0.05),
        "eps": {"sgd": None, "adagrad": 1e-10}.get(optimizer, 1e-8),
        "dense_in": 4,
    }


def configs(spec, prefix="", **cache):
    """cache: cache_bytes= / cache_staleness= for every table."""
    return [recstore.EmbeddingBagConfig(
        prefix + name, t["dim"], list(t["features"]), pooling=spec["pooling"],
        optimizer=spec["optimizer"], lr=spec["lr"],
        eps=spec["eps"],
        initial_accumulator=(0.0 if spec["optimizer"] in
                             ("adagrad", "rowwise_adagrad") else None),
        num_embeddings=1024, **cache)
        for name, t in spec["tables"].items()]


class Dense(torch.nn.Module):
    def __init__(self, spec):
        super().__init__()
        width = sum(spec["tables"][tname]["dim"]
                    for f in spec["features"]
                    for tname, t in spec["tables"].items()
                    if f in t["features"])
        self.bottom = torch.nn.Linear(spec["dense_in"], 8)
        self.top = torch.nn.Linear(8 + width, 1)

    def forward(self, pooled, dense):
        x = torch.relu(self.bottom(dense))
        return self.top(torch.cat([x, pooled], dim=1)).squeeze(1)


class ReferenceModel(torch.nn.Module):
    """torch.nn.EmbeddingBag per table; features of a table share it."""

    def __init__(self, spec, weighted):
        super().__init__()
        self.spec = spec
        self.weighted = weighted
        g = torch.Generator().manual_seed(7)
        self.emb = torch.nn.ModuleDict()
        for name, t in spec["tables"].items():
            bag = torch.nn.EmbeddingBag(t["rows"], t["dim"],
                                        mode=spec["pooling"])
            with torch.no_grad():
                bag.weight.copy_(torch.rand(t["rows"], t["dim"],
                                            generator=g) - 0.5)
            self.emb[name] = bag
        torch.manual_seed(11)
        self.dense = Dense(spec)

    def feature_table(self, f):
        return next(n for n, t in self.spec["tables"].items()
                    if f in t["features"])

    def forward(self, jf, dense):
        parts = []
        for f in self.spec["features"]:
            v, o, w = jf.feature(f)
            parts.append(self.emb[self.feature_table(f)](
                v, o[:-1], per_sample_weights=w))
        return self.dense(torch.cat(parts, dim=1), dense)

    def set_embedding_lr(self, lr, optimizers):
        """The embeddings' optimizer is the first of optimizers()."""
        opt = optimizers[0]
        if isinstance(opt, RowReference):
            opt.lr = lr
        else:
            for g in opt.param_groups:
                g["lr"] = lr

    def initial_rows(self):
        return {n: self.emb[n].weight.detach().numpy().copy()
                for n in self.spec["tables"]}

    def table_rows(self, name, keys):
        return self.emb[name].weight.detach().numpy()[keys.astype(np.int64)]

    def optimizers(self):
        s = self.spec
        emb = list(self.emb.parameters())
        if s["optimizer"] == "sgd":
            e = torch.optim.SGD(emb, lr=s["lr"])
        elif s["optimizer"] == "adagrad":
            e = torch.optim.Adagrad(emb, lr=s["lr"], eps=s["eps"],
                                    initial_accumulator_value=0.0)
        else:
            e = RowReference(self, s["optimizer"], s["lr"], s["eps"])
        return [e, torch.optim.SGD(self.dense.parameters(), lr=0.1)]


class RowReference:
    """Reference optimizers that update only the rows a batch touched, as
    the store does: FBGEMM's row-wise Adagrad (one accumulator per row,
    G += mean(g^2); w -= lr / (sqrt(G) + eps) * g) and Adam with a per-row
    step count (docs/optimizers.md). Computed in float64 and rounded."""

    def __init__(self, model, kind, lr, eps, beta1=0.9, beta2=0.999):
        self.model, self.kind, self.lr, self.eps = model, kind, lr, eps
        self.b1, self.b2 = beta1, beta2
        self.state = {}
        self.batch = None

    def zero_grad(self):
        for p in self.model.emb.parameters():
            p.grad = None

    def step(self):
        for name, bag in self.model.emb.items():
            w = bag.weight.detach().numpy()
            g_all = bag.weight.grad.numpy()
            for k in self.touched(name):
                g = g_all[k].astype(np.float64)
                st = self.state.setdefault((name, k), {
                    "G": 0.0, "t": 0, "m": np.zeros_like(g),
                    "v": np.zeros_like(g)})
                x = w[k].astype(np.float64)
                if self.kind == "rowwise_adagrad":
                    st["G"] = float(np.float32(st["G"] + np.mean(g * g)))
                    x = x - self.lr / (np.sqrt(st["G"]) + self.eps) * g
                else:  # adam, bias corrections from the row's own steps
                    st["t"] += 1
                    st["m"] = self.b1 * st["m"] + (1 - self.b1) * g
                    st["v"] = self.b2 * st["v"] + (1 - self.b2) * g * g
                    mh = st["m"] / (1 - self.b1 ** st["t"])
                    vh = st["v"] / (1 - self.b2 ** st["t"])
                    x = x - self.lr * mh / (np.sqrt(vh) + self.eps)
                w[k] = x.astype(np.float32)

    def touched(self, name):
        ids = [self.batch.feature(f)[0]
               for f in self.model.spec["tables"][name]["features"]]
        return sorted(set(torch.cat(ids).tolist()))


class StoreModel(torch.nn.Module):
    """The same model with its tables in the store: same initial rows (put),
    same dense layers (copied from the reference)."""

    def __init__(self, spec, client, dense_from, weighted, prefix="",
                 cache=None, **ebc_kw):
        super().__init__()
        self.spec = spec
        self.ebc = recstore.EmbeddingBagCollection(
            client, configs(spec, prefix, **(cache or {})), **ebc_kw)
        for name, rows in dense_from.initial_rows().items():
            keys = np.arange(len(rows), dtype=np.uint64)
            self.ebc.table(prefix + name).put(keys, rows)
        self.dense = copy.deepcopy(dense_from.dense)

    def forward(self, jf, dense):
        return self.dense(self.ebc(jf).values(), dense)

    def set_embedding_lr(self, lr, optimizers):
        self.ebc.set_learning_rate(lr)

    def optimizers(self):
        return [torch.optim.SGD(self.dense.parameters(), lr=0.1)]


def batches(spec, steps, weighted, seed, overlap=False):
    """Random jagged batches: 0..3 ids per bag (empty bags included),
    duplicates within and across bags, dense inputs and 0/1 labels."""
    rng = np.random.default_rng(seed)
    out = []
    b = spec["batch"]
    for _ in range(steps):
        vals, lens = [], []
        for f in spec["features"]:
            t = next(t for t in spec["tables"].values() if f in t["features"])
            hi = 6 if overlap else t["rows"]
            n = rng.integers(0, 4, size=b)
            lens.append(n)
            vals.append(rng.integers(0, hi, size=int(n.sum())))
        values = torch.from_numpy(np.concatenate(vals).astype(np.int64))
        w = None
        if weighted:
            w = torch.from_numpy(rng.random(values.numel()).astype(np.float32))
        jf = recstore.JaggedFeatures(
            spec["features"], values,
            lengths=torch.from_numpy(np.concatenate(lens).astype(np.int64)),
            weights=w)
        dense = torch.from_numpy(rng.standard_normal(
            (b, spec["dense_in"])).astype(np.float32))
        labels = torch.from_numpy((rng.random(b) < 0.5).astype(np.float32))
        out.append((jf, dense, labels))
    return out


def train(model, data, optimizers, lr_fn=None):
    """Train on data; lr_fn(step) -> the embeddings' learning rate of that
    step (a schedule), set before the step on either kind of model."""
    losses = []
    lossf = torch.nn.BCEWithLogitsLoss()
    for i, (jf, dense, labels) in enumerate(data):
        if lr_fn is not None:
            model.set_embedding_lr(lr_fn(i), optimizers)
        for o in optimizers:
            if isinstance(o, RowReference):
                o.batch = jf
            o.zero_grad()
        loss = lossf(model(jf, dense), labels)
        loss.backward()
        for o in optimizers:
            o.step()
        losses.append(loss.item())
    if hasattr(model, "ebc"):
        model.ebc.flush()   # the last batch's update is asynchronous
    return np.array(losses)


def train_prefetch(model, data, optimizers):
    """train() with the next batch prefetched while the current one runs."""
    losses = []
    lossf = torch.nn.BCEWithLogitsLoss()
    model.ebc.prefetch(data[0][0])
    for i, (jf, dense, labels) in enumerate(data):
        for o in optimizers:
            o.zero_grad()
        out = model(jf, dense)
        if i + 1 < len(data):
            model.ebc.prefetch(data[i + 1][0])
        loss = lossf(out, labels)
        loss.backward()
        for o in optimizers:
            o.step()
        losses.append(loss.item())
    if hasattr(model, "ebc"):
        model.ebc.flush()   # the last batch's update is asynchronous
    return np.array(losses)


def signal_batch(spec, rng):
    """A batch with a learnable signal: one id per feature and sample; the
    label is 1 when f0's id is in the lower half of its table."""
    b = spec["batch"]
    vals = []
    for f in spec["features"]:
        t = next(t for t in spec["tables"].values() if f in t["features"])
        vals.append(rng.integers(0, t["rows"], size=b))
    rows0 = next(t["rows"] for t in spec["tables"].values()
                 if "f0" in t["features"])
    labels = torch.from_numpy((vals[0] < rows0 // 2).astype(np.float32))
    jf = recstore.JaggedFeatures(
        spec["features"], torch.from_numpy(np.concatenate(vals)),
        lengths=torch.ones(b * len(spec["features"]), dtype=torch.int64))
    return jf, labels


def store_rows(client, spec, prefix=""):
    """{table: (keys, rows)} of every key of the spec, read from the store."""
    out = {}
    for name, t in spec["tables"].items():
        keys = np.arange(t["rows"], dtype=np.uint64)
        out[name] = (keys, client.table(prefix + name).get(keys))
    return out


def assert_dense_equal(test, store, ref, atol=1e-5):
    for (n1, p1), (n2, p2) in zip(store.dense.named_parameters(),
                                  ref.dense.named_parameters()):
        test.assertEqual(n1, n2)
        np.testing.assert_allclose(p1.detach().numpy(), p2.detach().numpy(),
                                   rtol=0, atol=atol, err_msg=n1)
