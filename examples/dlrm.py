#!/usr/bin/env python3
"""A DLRM-style click model trained against a RecStore store.

    PYTHONPATH=build/python python3 examples/dlrm.py --nodes 10.0.0.1:7471

Model (Naumov et al., 2019): a bottom MLP over 13 dense features, 26 sparse
features each embedded by its own table in the store (recstore.
EmbeddingBagCollection, Adagrad on the memory nodes), pairwise dot-product
interaction of the 27 vectors, and a top MLP to one logit. Dense
parameters train with torch's Adagrad in the trainer.

Data: a synthetic click log with a learnable signal, generated from --seed
alone (the same seed gives the same data on any machine): every id of every
feature has a hidden weight, the dense features have hidden weights too,
and a sample is a click with probability sigmoid(sum of its hidden
weights + bias). Ids follow a Zipf-like law, as real categorical features
do. A held-out set of the same law measures the model.

Per epoch it prints the training loss, the held-out loss and AUC, and the
AUC of a frequency baseline (each id's empirical click rate in the
training data, averaged over a sample's ids), which the model should beat.
Per-step time is split into lookup (fetching rows from the store),
forward/backward (torch, without the store calls) and update (sending
gradients); with --stats-file the trainer writes, every --stats-interval-ms,
one line per stage with count, p50 and p99 over that window (tail -f it),
and with a row cache (--row-cache-mb) a line of the cache's hits and
probes in that window.

--row-cache-mb M gives the 26 tables a row cache on this trainer, M MiB in
all (docs/python.md, "Row cache"): hot rows whose copy is proven current
by a 16-byte READ (exact, the default), or with --row-cache-staleness K
used without a READ while at most K steps old. 64 MiB, exact, by
default (the main job's); --row-cache-mb 0 turns it off.
"""

import argparse
import os
import sys
import time

import numpy as np
import torch

import recstore


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nodes", default=os.environ.get("RS_NODES"),
                   help="memory nodes, addr:port[,addr:port...] "
                        "(default $RS_NODES)")
    p.add_argument("--device", default=os.environ.get("RS_DEVICE"),
                   help="RDMA device name or IP (default: the first)")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--steps", type=int, default=40, help="batches per epoch")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--eval", type=int, default=4096, help="held-out samples")
    p.add_argument("--dim", type=int, default=16)
    p.add_argument("--ids", type=int, default=2000,
                   help="distinct ids per sparse feature")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--prefix", default="dlrm_", help="table name prefix")
    p.add_argument("--stats-file", default=os.environ.get("RS_STAGE_FILE"))
    p.add_argument("--stats-interval-ms", type=int,
                   default=int(os.environ.get("RS_STAGE_INTERVAL_MS", 1000)))
    p.add_argument("--row-cache-mb", type=float, default=64.0,
                   help="row cache on this trainer, MiB over all tables "
                        "(0: none)")
    p.add_argument("--row-cache-staleness", type=int, default=None,
                   help="rows at most this many steps old are used "
                        "without a READ (default: exact probes)")
    p.add_argument("--no-progress", action="store_true")
    a = p.parse_args(argv)
    if not a.nodes:
        p.error("--nodes (or RS_NODES) is required")
    if a.row_cache_mb < 0:
        p.error("--row-cache-mb must be >= 0")
    if a.row_cache_staleness is not None and a.row_cache_staleness < 0:
        p.error("--row-cache-staleness must be >= 0")
    return a


N_DENSE, N_SPARSE = 13, 26


class ClickLog:
    """The synthetic click log: hidden weights from the seed, samples from
    a generator of their own."""

    def __init__(self, seed, ids):
        g = np.random.default_rng(seed)
        self.ids = ids
        self.w_sparse = g.normal(0, 0.6, size=(N_SPARSE, ids))
        self.w_dense = g.normal(0, 0.4, size=N_DENSE)
        self.bias = -1.0
        # Zipf-like popularity: rank r drawn with probability ~ 1/(r+10)
        p = 1.0 / (np.arange(ids) + 10.0)
        self.p = p / p.sum()
        self.perm = np.stack([g.permutation(ids) for _ in range(N_SPARSE)])

    def sample(self, n, g):
        dense = g.standard_normal((n, N_DENSE)).astype(np.float32)
        ranks = g.choice(self.ids, size=(n, N_SPARSE), p=self.p)
        sparse = self.perm[np.arange(N_SPARSE), ranks]          # (n, 26)
        logit = (dense @ self.w_dense + self.bias +
                 self.w_sparse[np.arange(N_SPARSE), sparse].sum(1) / 3.0)
        label = (g.random(n) < 1 / (1 + np.exp(-logit))).astype(np.float32)
        return dense, sparse.astype(np.int64), label


def features(sparse):
    """(n, 26) ids -> JaggedFeatures, one id per feature and sample."""
    n = sparse.shape[0]
    return recstore.JaggedFeatures(
        ["c%d" % i for i in range(N_SPARSE)],
        torch.from_numpy(np.ascontiguousarray(sparse.T).reshape(-1)),
        lengths=torch.ones(N_SPARSE * n, dtype=torch.int64))


def mlp(sizes, last_act=True):
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2 or last_act:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


class DLRM(torch.nn.Module):
    def __init__(self, client, dim, lr, prefix, cache_bytes=0,
                 cache_staleness=None):
        super().__init__()
        cfgs = [recstore.EmbeddingBagConfig(
            "%sc%d" % (prefix, i), dim, ["c%d" % i], optimizer="adagrad",
            lr=lr, init="uniform", init_a=0.05, init_seed=i,
            num_embeddings=4096, cache_bytes=cache_bytes,
            cache_staleness=cache_staleness) for i in range(N_SPARSE)]
        self.ebc = recstore.EmbeddingBagCollection(client, cfgs)
        self.bottom = mlp([N_DENSE, 64, dim])
        n = N_SPARSE + 1
        self.top = mlp([dim + n * (n - 1) // 2, 64, 1], last_act=False)
        self.iu = torch.triu_indices(n, n, offset=1)

    def forward(self, dense, jf):
        x = self.bottom(dense)                                    # (B, d)
        e = self.ebc(jf).values().view(dense.shape[0], N_SPARSE, -1)
        z = torch.cat([x.unsqueeze(1), e], dim=1)                 # (B, 27, d)
        inter = torch.bmm(z, z.transpose(1, 2))[:, self.iu[0], self.iu[1]]
        return self.top(torch.cat([x, inter], dim=1)).squeeze(1)


def auc(score, label):
    """Area under the ROC curve by ranks (ties averaged)."""
    order = np.argsort(score, kind="mergesort")
    s = score[order]
    ranks = np.empty(len(s))
    i = 0
    while i < len(s):
        j = i
        while j + 1 < len(s) and s[j + 1] == s[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2 + 1
        i = j + 1
    pos = label == 1
    npos, nneg = pos.sum(), (~pos).sum()
    if not npos or not nneg:
        return float("nan")
    return (ranks[pos].sum() - npos * (npos + 1) / 2) / (npos * nneg)


class FrequencyBaseline:
    """Each id's empirical click rate in the training data (smoothed
    towards the global rate), averaged over a sample's 26 ids."""

    def __init__(self, ids):
        self.clicks = np.zeros((N_SPARSE, ids))
        self.seen = np.zeros((N_SPARSE, ids))

    def add(self, sparse, label):
        for f in range(N_SPARSE):
            np.add.at(self.clicks[f], sparse[:, f], label)
            np.add.at(self.seen[f], sparse[:, f], 1)

    def score(self, sparse):
        prior = self.clicks.sum() / max(self.seen.sum(), 1)
        rate = (self.clicks + 5 * prior) / (self.seen + 5)
        return rate[np.arange(N_SPARSE), sparse].mean(1)


class Stages:
    """Per-stage durations; every interval, one line per stage with the
    count, p50 and p99 of that window (ms) to a file; with counters (a
    callable -> dict, the row cache's), one more line of their growth in
    that window."""

    CACHE_KEYS = ("hits", "stale_hits", "probes", "probe_misses")

    def __init__(self, path, interval_ms, counters=None):
        self.f = open(path, "a", buffering=1) if path else None
        self.interval = interval_ms / 1000.0
        self.window = {}
        self.total = {}
        self.last = time.monotonic()
        self.counters = counters
        self.seen = counters() if counters and self.f else None

    def add(self, step):
        """One step's {stage: seconds}."""
        for stage, seconds in step.items():
            self.window.setdefault(stage, []).append(seconds)
            self.total[stage] = self.total.get(stage, 0.0) + seconds
        now = time.monotonic()
        if self.f and now - self.last >= self.interval:
            self.flush(now)

    def flush(self, now=None):
        now = now or time.monotonic()
        if self.f:
            ts = time.strftime("%Y-%m-%dT%H:%M:%S")
            for st, v in sorted(self.window.items()):
                ms = np.array(v) * 1e3
                self.f.write("%s trainer stage=%s count=%d p50_ms=%.3f "
                             "p99_ms=%.3f\n" % (ts, st, len(ms),
                                                np.percentile(ms, 50),
                                                np.percentile(ms, 99)))
            if self.seen is not None:
                now_c = self.counters()
                self.f.write("%s trainer cache %s\n" % (ts, " ".join(
                    "%s=%d" % (k, now_c[k] - self.seen[k])
                    for k in self.CACHE_KEYS)))
                self.seen = now_c
        self.window = {}
        self.last = now


def bar(done, total, text, enabled):
    if not enabled:
        return
    w = 30
    k = int(w * done / max(total, 1))
    sys.stderr.write("\r[%s%s] %d/%d %s" % ("#" * k, "." * (w - k), done,
                                             total, text))
    if done == total:
        sys.stderr.write("\n")
    sys.stderr.flush()


def main(argv=None):
    """Train; returns the per-epoch figures as a list of dicts."""
    a = parse(argv)
    torch.manual_seed(a.seed)
    log = ClickLog(a.seed, a.ids)
    g_train = np.random.default_rng(a.seed + 1)
    ev_dense, ev_sparse, ev_label = log.sample(a.eval,
                                               np.random.default_rng(a.seed + 2))
    kw = {"device": a.device} if a.device else {}
    client = recstore.Client(a.nodes, **kw)
    for i in range(N_SPARSE):      # a fresh start: the tables of a past run
        client.drop_table("%sc%d" % (a.prefix, i), missing_ok=True)
    cache_bytes = int(a.row_cache_mb * (1 << 20)) // N_SPARSE
    model = DLRM(client, a.dim, a.lr, a.prefix, cache_bytes,
                 a.row_cache_staleness)
    opt = torch.optim.Adagrad(list(model.bottom.parameters()) +
                              list(model.top.parameters()), lr=a.lr)
    lossf = torch.nn.BCEWithLogitsLoss()
    base = FrequencyBaseline(a.ids)
    stages = Stages(a.stats_file, a.stats_interval_ms,
                    model.ebc.cache_stats if cache_bytes else None)
    progress = not a.no_progress and sys.stderr.isatty()
    print("DLRM: %d dense + %d sparse features, dim %d, %d ids per feature, "
          "batch %d, %d steps x %d epochs, nodes %s"
          % (N_DENSE, N_SPARSE, a.dim, a.ids, a.batch, a.steps, a.epochs,
             a.nodes), flush=True)
    st = model.ebc.stats
    history = []
    longest = (0.0, 0, 0)   # the slowest step after the first: s, epoch, step
    for epoch in range(1, a.epochs + 1):
        losses = []
        t_epoch = time.monotonic()
        for step in range(a.steps):
            dense, sparse, label = log.sample(a.batch, g_train)
            base.add(sparse, label)
            jf = features(sparse)
            look0, upd0 = st["lookup_s"], st["update_wait_s"]
            t0 = time.monotonic()
            opt.zero_grad()
            loss = lossf(model(torch.from_numpy(dense), jf),
                         torch.from_numpy(label))
            loss.backward()
            opt.step()
            total = time.monotonic() - t0
            if total > longest[0] and (epoch, step) != (1, 0):
                longest = (total, epoch, step + 1)   # step 1 warms up
            # the update is sent in the background: on the step's path is
            # only the time a lookup waited for the previous one
            look, upd = st["lookup_s"] - look0, st["update_wait_s"] - upd0
            stages.add({"lookup": look, "update": upd,
                        "forward_backward": total - look - upd})
            losses.append(loss.item())
            bar(step + 1, a.steps, "epoch %d loss %.4f" % (epoch,
                                                            np.mean(losses)),
                progress)
        with torch.no_grad():
            scores, ev_losses = [], []
            for i in range(0, a.eval, a.batch):
                d = torch.from_numpy(ev_dense[i:i + a.batch])
                s = ev_sparse[i:i + a.batch]
                y = torch.from_numpy(ev_label[i:i + a.batch])
                out = model(d, features(s))
                ev_losses.append(lossf(out, y).item() * len(y))
                scores.append(torch.sigmoid(out).numpy())
        score = np.concatenate(scores)
        history.append({"train_loss": float(np.mean(losses)),
                        "eval_loss": sum(ev_losses) / a.eval,
                        "auc": auc(score, ev_label),
                        "baseline_auc": auc(base.score(ev_sparse), ev_label),
                        "first_loss": losses[0], "last_loss": losses[-1]})
        h = history[-1]
        print("epoch %d: train loss %.4f, eval loss %.4f, eval AUC %.4f "
              "(frequency baseline AUC %.4f), %.1f s"
              % (epoch, h["train_loss"], h["eval_loss"], h["auc"],
                 h["baseline_auc"], time.monotonic() - t_epoch), flush=True)
    stages.flush()
    model.ebc.flush()
    n = max(st["updates"], 1)
    print("time per step: lookup %.1f ms, forward/backward %.1f ms, "
          "waiting for the last update %.1f ms (sending it took %.1f ms, "
          "in the background); %d lookups (%d keys), %d update batches "
          "(%d tables, %d keys)"
          % (stages.total["lookup"] / (a.steps * a.epochs) * 1e3,
             stages.total["forward_backward"] / (a.steps * a.epochs) * 1e3,
             stages.total["update"] / (a.steps * a.epochs) * 1e3,
             st["update_s"] / max(st["update_batches"], 1) * 1e3,
             st["lookups"], st["lookup_keys"], st["update_batches"], n,
             st["update_keys"]), flush=True)
    cs = client.stats()
    rc = model.ebc.cache_stats()
    probed = rc["hits"] - rc["stale_hits"]   # also in onesided_keys
    print("lookup keys by path: %d trainer cache after a probe, %d trainer "
          "cache without a probe, %d one-sided READ, %d RPC (%d first-time "
          "creations, %d other GET RPC), %d computed from the initializer "
          "in evaluation (nothing written)"
          % (probed, rc["stale_hits"], cs["onesided_keys"] - probed,
             cs["get_or_init_keys"] + cs["rpc_keys"], cs["get_or_init_keys"],
             cs["rpc_keys"], st["init_local_keys"]), flush=True)
    cold = cs.get("bucket_cache_hits", 0)
    print("one-sided round trips: %d READs for %d one-sided keys (%.2f per "
          "key); %d keys missing the location cache found in one READ "
          "through %d prefetched bucket images (%d images stale)"
          % (cs["reads_posted"], cs["onesided_keys"],
             cs["reads_posted"] / max(cs["onesided_keys"], 1), cold,
             model.ebc.index_images, cs.get("bucket_cache_stale", 0)),
          flush=True)
    history[-1]["row_cache"] = rc
    history[-1]["bucket_images"] = {"prefetched": model.ebc.index_images,
                                    "hits": cold,
                                    "stale": cs.get("bucket_cache_stale",
                                                    0)}
    if cache_bytes:
        print("row cache: %.1f MiB (%s), %d probes (%d found the row "
              "changed), %d rows from update replies, %.1f MiB of rows not "
              "READ, %.1f MiB held"
              % (a.row_cache_mb, "exact" if a.row_cache_staleness is None
                 else "staleness %d" % a.row_cache_staleness, rc["probes"],
                 rc["probe_misses"], rc["update_rows"],
                 rc["bytes_saved"] / (1 << 20), rc["bytes"] / (1 << 20)),
              flush=True)
    print("longest step: %.0f ms (epoch %d, step %d); the client followed "
          "%d configuration changes and resent %d keys"
          % (longest[0] * 1e3, longest[1], longest[2],
             cs.get("config_refreshes", 0), cs.get("epoch_retries", 0)),
          flush=True)
    model.ebc.close()
    client.close()
    return history


if __name__ == "__main__":
    main()
