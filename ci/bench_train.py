"""bench_train.py - the trainer's data path, measured (ci/bench-train.sh).

The DLRM shape: 26 tables of dim D, one id per feature and sample, ids
Zipf(s) over N per table (hot ids scattered by a hash). Per step, after
W warm-up steps, it times the lookup and the update as a trainer waits for
them, counts the distinct keys (what must cross the fabric), the keys by
path, and the node's CPU time (/proc/PID/stat of the node process, which
runs in the same guest). Two modes on one node:

  rpc       what the collection did before its data path: per table one
            get(init=True) (GET_OR_INIT RPC) and, after backward, one
            blocking update per table;
  onesided  recstore.EmbeddingBagCollection: one get_multi of one-sided
            READs for all tables, GET_OR_INIT only for first-time ids,
            updates batched and sent in the background;
  cache     onesided with a row cache of --cache-mb MiB per table on the
            trainer (docs/python.md, "Row cache"): exact (a 16-byte
            version READ per cached key) or, with --cache-staleness K,
            rows at most K steps old used without a READ.

Per mode it also reports the looked-up keys per second, the READ work
requests per key (reads_posted: rows and probes) and the row bytes READ
per key (the keys READ by row times the row's stride, less what the
cache saved: row_cache_bytes_saved), and the cache's hit rate.

Prints "result KEY VALUE" lines for bench-train.sh.
"""

import argparse
import os
import time

import numpy as np
import torch

import recstore


def node_cpu_s(pid):
    with open("/proc/%d/stat" % pid) as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")


class Zipf:
    def __init__(self, n, s, seed):
        p = 1.0 / np.arange(1, n + 1) ** s
        self.cdf = np.cumsum(p / p.sum())
        self.perm = np.random.default_rng(seed).permutation(n)
        self.rng = np.random.default_rng(seed + 1)

    def sample(self, k):
        r = np.searchsorted(self.cdf, self.rng.random(k))
        return self.perm[np.minimum(r, len(self.perm) - 1)]


def batches(a):
    z = [Zipf(a.ids, a.zipf, 1000 + t) for t in range(a.tables)]
    for _ in range(a.warmup + a.steps):
        vals = np.concatenate([z[t].sample(a.batch) for t in range(a.tables)])
        yield recstore.JaggedFeatures(
            ["f%d" % t for t in range(a.tables)],
            torch.from_numpy(vals.astype(np.int64)),
            lengths=torch.ones(a.tables * a.batch, dtype=torch.int64))


def populate(a, c, names):
    """Every id of every table written once: the measured steps train a
    model that exists (days into training), not its first sightings."""
    keys = np.arange(a.ids, dtype=np.uint64)
    rows = np.random.default_rng(7).uniform(
        -0.01, 0.01, (a.ids, a.dim)).astype(np.float32)
    for n in names:
        t = c.table(n)
        for i in range(0, a.ids, 4096):
            t.put(keys[i:i + 4096], rows[i:i + 4096])


def run_rpc(a, c, names):
    tabs = [c.table(n) for n in names]
    out = {"lookup": 0.0, "update": 0.0, "keys": 0, "distinct": 0}
    for i, jf in enumerate(batches(a)):
        if i == a.warmup:
            out = {k: 0 for k in out}
            cpu0 = node_cpu_s(a.node_pid)
        t0 = time.perf_counter()
        rows = []
        for t, n in zip(tabs, range(a.tables)):
            keys = np.unique(jf.feature("f%d" % n)[0].numpy()).astype(
                np.uint64)
            rows.append((t, keys, t.get(keys, init=True)))
        t1 = time.perf_counter()
        for t, keys, r in rows:
            t.update(keys, np.full_like(r, 1e-3))
        t2 = time.perf_counter()
        out["lookup"] += t1 - t0
        out["update"] += t2 - t1
        out["keys"] += jf.values().numel()
        out["distinct"] += sum(len(k) for _, k, _ in rows)
    out["cpu"] = node_cpu_s(a.node_pid) - cpu0
    return out


def run_onesided(a, c, names):
    cache = int(a.cache_mb * (1 << 20)) if a.mode == "cache" else 0
    ebc = recstore.EmbeddingBagCollection(c, [
        recstore.EmbeddingBagConfig(n, a.dim, ["f%d" % i], optimizer="adagrad",
                                    lr=0.01, cache_bytes=cache,
                                    cache_staleness=a.cache_staleness)
        for i, n in enumerate(names)],
        staleness=a.staleness)
    st = ebc.stats
    out = {}
    for i, jf in enumerate(batches(a)):
        if i == a.warmup:
            ebc.flush()
            base = dict(st)
            cs0 = c.stats()
            cpu0 = node_cpu_s(a.node_pid)
            out = {"lookup": 0.0, "update": 0.0, "keys": 0, "distinct": 0}
        pooled = ebc(jf)
        (pooled.values() * 1e-3).sum().backward()
        if i >= a.warmup:
            out["keys"] += jf.values().numel()
    ebc.flush()
    out["cpu"] = node_cpu_s(a.node_pid) - cpu0
    out["lookup"] = st["lookup_s"] - base["lookup_s"]
    out["update"] = st["update_wait_s"] - base["update_wait_s"]
    out["update_bg"] = st["update_s"] - base["update_s"]
    out["distinct"] = st["lookup_keys"] - base["lookup_keys"]
    cs = c.stats()
    out["onesided_keys"] = cs["onesided_keys"] - cs0["onesided_keys"]
    out["rpc_keys"] = (cs["rpc_keys"] - cs0["rpc_keys"] +
                       cs["get_or_init_keys"] - cs0["get_or_init_keys"])
    rc0 = {k: cs0.get("row_cache_" + k, 0) for k in
           ("hits", "stale_hits", "probes", "probe_misses", "bytes_saved")}
    for k in rc0:
        out["cache_" + k] = cs["row_cache_" + k] - rc0[k]
    out["cache_keys"] = out["cache_hits"]
    out["cache_bytes"] = cs["row_cache_bytes"]
    out["reads_posted"] = cs["reads_posted"] - cs0["reads_posted"]
    # keys READ as a row: one-sided keys less the ones a probe proved
    read = out["onesided_keys"] - (out["cache_hits"] -
                                   out["cache_stale_hits"])
    out["row_bytes_read"] = read * row_stride(a.dim)
    ebc.close()
    return out


def row_stride(dim):
    """A row's bytes in the node's slot (what one-sided READs fetch): a
    32-byte header and dim fp32, in 64-byte lines (bench-train.sh's row)."""
    return (32 + dim * 4 + 63) // 64 * 64


def mode_name(a):
    if a.mode == "rpc":
        return "rpc"
    if a.mode == "onesided":
        return "onesided_s%d" % a.staleness
    return "cache_%s_s%d" % ("exact" if a.cache_staleness is None
                             else "k%d" % a.cache_staleness, a.staleness)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--nodes", required=True)
    p.add_argument("--device")
    p.add_argument("--node-pid", type=int, required=True)
    p.add_argument("--mode", choices=("rpc", "onesided", "cache"),
                   required=True)
    p.add_argument("--tables", type=int, default=26)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--batch", type=int, default=1024)
    p.add_argument("--ids", type=int, default=10000)
    p.add_argument("--zipf", type=float, default=0.99)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--staleness", type=int, default=0)
    p.add_argument("--cache-mb", type=float, default=8.0,
                   help="--mode cache: row cache per table, MiB")
    p.add_argument("--cache-staleness", type=int, default=None,
                   help="--mode cache: steps a row is used without a READ "
                        "(default: exact)")
    p.add_argument("--no-populate", action="store_true",
                   help="start from empty tables (first sightings)")
    a = p.parse_args()
    kw = {"device": a.device} if a.device else {}
    c = recstore.Client(a.nodes, **kw)
    names = ["bt_%d" % t for t in range(a.tables)]
    for n in names:
        c.drop_table(n, missing_ok=True)
        c.create_table(n, a.dim, optimizer="adagrad", lr=0.01,
                       capacity=1 << (a.ids * 3 // 2 - 1).bit_length())
    if not a.no_populate:
        populate(a, c, names)
    o = (run_rpc if a.mode == "rpc" else run_onesided)(a, c, names)
    m = mode_name(a)
    s = a.steps
    print("result train_%s_lookup_ms %.3f" % (m, o["lookup"] / s * 1e3))
    print("result train_%s_update_ms %.3f" % (m, o["update"] / s * 1e3))
    print("result train_%s_distinct_keys_per_step %.1f" % (m, o["distinct"] / s))
    print("result train_%s_node_cpu_s_per_mkeys %.3f"
          % (m, o["cpu"] / max(o["keys"], 1) * 1e6))
    print("result train_%s_keys_per_s %.1f"
          % (m, o["keys"] / max(o["lookup"] + o["update"], 1e-9)))
    for k in ("onesided_keys", "rpc_keys", "cache_keys", "cache_hits",
              "cache_stale_hits", "cache_probes", "cache_probe_misses",
              "cache_bytes_saved", "cache_bytes", "reads_posted"):
        if k in o:
            print("result train_%s_%s %d" % (m, k, o[k]))
    if "reads_posted" in o:
        d = max(o["distinct"], 1)
        print("result train_%s_reads_per_key %.3f" % (m, o["reads_posted"] / d))
        print("result train_%s_bytes_read_per_key %.1f"
              % (m, (o["row_bytes_read"] + 16 * o["cache_probes"]) / d))
        print("result train_%s_cache_hit_rate %.3f" % (m, o["cache_hits"] / d))
    if "update_bg" in o:
        print("result train_%s_update_background_ms %.3f"
              % (m, o["update_bg"] / s * 1e3))
    c.close()


if __name__ == "__main__":
    main()
