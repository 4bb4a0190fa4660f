"""TrainPipeline and collate_jagged: batches prefetched k ahead.

The model is TorchRec's TrainPipelineSparseDist: while batch i trains, the
rows of batches i+1..i+k are already on their way. Here that is the
collection's prefetch(): TrainPipeline keeps a window of k + 1 batches
from any iterable (a torch DataLoader with workers and pinned memory
included), issues prefetch() for each batch as it enters the window, and
yields them in order; the trainer calls ebc(features) on each as usual and
gets the prefetched rows (checked against the staleness policy:
docs/python.md, "The data path").

    loader = torch.utils.data.DataLoader(dataset, batch_size=256,
                                         num_workers=2, pin_memory=True,
                                         collate_fn=recstore.collate_jagged)
    for jf, dense, label in recstore.TrainPipeline(ebc, loader, depth=2):
        loss = lossf(model(dense, jf), label)
        ...

collate_jagged turns samples whose first element is {feature: ids} into
(JaggedFeatures, the rest collated by torch's default_collate): the
jagged batch is built in the DataLoader's worker, and JaggedFeatures
pickles and pins like a tensor.
"""

import collections

import numpy as np
import torch

from .jagged import JaggedFeatures


def _sparse_batch(dicts, names):
    vals, lens, wts = [], [], []
    weighted = None
    for f in names:
        for d in dicts:
            x = d[f]
            if isinstance(x, tuple):         # (ids, weights)
                ids, w = x
            else:
                ids, w = x, None
            if weighted is None:
                weighted = w is not None
            elif weighted != (w is not None):
                raise ValueError("feature %r: weights for some samples "
                                 "only" % f)
            ids = torch.as_tensor(np.asarray(ids, dtype=np.int64)).reshape(-1)
            vals.append(ids)
            lens.append(ids.numel())
            if weighted:
                wts.append(torch.as_tensor(np.asarray(w, dtype=np.float32))
                           .reshape(-1))
    return JaggedFeatures(
        names, torch.cat(vals) if vals else torch.zeros(0, dtype=torch.int64),
        lengths=torch.tensor(lens, dtype=torch.int64),
        weights=torch.cat(wts) if weighted else None)


def collate_jagged(samples):
    """A DataLoader collate_fn. Each sample is {feature: ids} or a tuple
    whose first element is; ids are a list or 1-d array of ids (or
    (ids, weights)). Every sample must name the same features. Returns
    JaggedFeatures, or (JaggedFeatures, *default_collate(rest))."""
    if not samples:
        raise ValueError("collate_jagged: an empty batch")
    first = samples[0]
    tupled = isinstance(first, (tuple, list))
    dicts = [s[0] if tupled else s for s in samples]
    if not isinstance(dicts[0], dict):
        raise TypeError("collate_jagged: a sample must be {feature: ids} or "
                        "a tuple starting with one, not %s"
                        % type(dicts[0]).__name__)
    names = list(dicts[0])
    for d in dicts:
        if list(d) != names:
            raise ValueError("collate_jagged: samples name different "
                             "features (%s, %s)" % (names, list(d)))
    jf = _sparse_batch(dicts, names)
    if not tupled:
        return jf
    rest = torch.utils.data.default_collate([tuple(s[1:]) for s in samples])
    return (jf,) + tuple(rest)


def _first(batch):
    return batch[0] if isinstance(batch, (tuple, list)) else batch


class TrainPipeline:
    """Iterate over batches with the rows of the next `depth` batches
    prefetched (depth >= 1, at most 8). features(batch) picks a batch's
    jagged features (default: the batch itself, or its first element).
    Breaking out early leaves prefetches that the collection drops; call
    close() to drop them at once."""

    def __init__(self, ebc, batches, *, depth=1, features=_first):
        if not isinstance(depth, int) or not 1 <= depth <= 8:
            raise ValueError("depth must be an int in 1..8, not %r"
                             % (depth,))
        self.ebc = ebc
        self.batches = batches
        self.depth = depth
        self.features = features
        self._window = collections.deque()

    def _admit(self, it):
        try:
            b = next(it)
        except StopIteration:
            return False
        self.ebc.prefetch(self.features(b))
        self._window.append(b)
        return True

    def __iter__(self):
        it = iter(self.batches)
        self._window.clear()
        while len(self._window) < self.depth + 1 and self._admit(it):
            pass
        while self._window:
            b = self._window.popleft()
            self._admit(it)
            yield b

    def close(self):
        self._window.clear()
        with self.ebc._lock:
            for p in self.ebc._pending:
                p.future.cancel()
            self.ebc._pending = []
