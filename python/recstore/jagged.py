"""JaggedFeatures: the sparse features of one batch, TorchRec's layout.

Feature-major, like torchrec.KeyedJaggedTensor: for F features and a batch
of B samples, lengths[f * B + b] ids of feature f belong to sample b, and
values holds them in that order. offsets (F * B + 1 entries) may be given
instead of lengths. Optional per-id weights (float32, one per value) are
used by sum pooling.

Ids are unsigned 64-bit keys. torch has no uint64, so ids at or above
2^63 travel as the int64 bit pattern: give values as a numpy uint64 array,
or as int64 with unsigned=True (values are bit patterns; negative ones
are ids >= 2^63). Otherwise a negative id is refused. int32 ids are
widened to int64.

Everything is checked on construction, so a bad batch fails here with a
message that says what is wrong, not deep inside a lookup.
"""

import numpy as np
import torch


def _tensor(x, what):
    if isinstance(x, np.ndarray):
        x = torch.from_numpy(x)
    if not isinstance(x, torch.Tensor):
        raise TypeError("%s must be a torch tensor or numpy array, not %s"
                        % (what, type(x).__name__))
    if x.device.type != "cpu":
        raise ValueError("%s must be on the CPU, not %s" % (what, x.device))
    if x.dim() != 1:
        raise ValueError("%s must be one-dimensional, not of shape %s"
                         % (what, tuple(x.shape)))
    return x


class JaggedFeatures:
    def __init__(self, keys, values, lengths=None, offsets=None,
                 weights=None, unsigned=False):
        keys = list(keys)
        if not keys:
            raise ValueError("JaggedFeatures needs at least one feature")
        for k in keys:
            if not isinstance(k, str) or not k:
                raise TypeError("feature names must be non-empty strings, "
                                "not %r" % (k,))
        if len(set(keys)) != len(keys):
            raise ValueError("feature names repeat: %s" % keys)
        if isinstance(values, np.ndarray) and values.dtype == np.uint64:
            values = np.ascontiguousarray(values).view(np.int64)
            unsigned = True
        values = _tensor(values, "values")
        if values.dtype == torch.int32:
            values = values.to(torch.int64)
        if values.dtype != torch.int64:
            raise TypeError("values must be int64 or int32 ids, not %s"
                            % values.dtype)
        if (lengths is None) == (offsets is None):
            raise ValueError("give exactly one of lengths and offsets")
        n = values.numel()
        if lengths is not None:
            lengths = _tensor(lengths, "lengths")
            if lengths.dtype not in (torch.int32, torch.int64):
                raise TypeError("lengths must be int32 or int64, not %s"
                                % lengths.dtype)
            lengths = lengths.to(torch.int64)
            if lengths.numel() % len(keys):
                raise ValueError("lengths has %d entries, not a multiple of "
                                 "the %d features" % (lengths.numel(),
                                                      len(keys)))
            if lengths.numel() and int(lengths.min()) < 0:
                raise ValueError("lengths has a negative entry")
            if int(lengths.sum()) != n:
                raise ValueError("lengths sum to %d but there are %d values"
                                 % (int(lengths.sum()), n))
            offsets = torch.zeros(lengths.numel() + 1, dtype=torch.int64)
            torch.cumsum(lengths, 0, out=offsets[1:])
        else:
            offsets = _tensor(offsets, "offsets")
            if offsets.dtype not in (torch.int32, torch.int64):
                raise TypeError("offsets must be int32 or int64, not %s"
                                % offsets.dtype)
            offsets = offsets.to(torch.int64)
            if offsets.numel() < 1 or (offsets.numel() - 1) % len(keys):
                raise ValueError("offsets has %d entries; F * B + 1 are "
                                 "needed for %d features" %
                                 (offsets.numel(), len(keys)))
            if int(offsets[0]) != 0:
                raise ValueError("offsets must start at 0, not %d"
                                 % int(offsets[0]))
            if offsets.numel() > 1 and bool((offsets[1:] < offsets[:-1]).any()):
                raise ValueError("offsets must not decrease")
            if int(offsets[-1]) != n:
                raise ValueError("offsets end at %d but there are %d values "
                                 "(offsets out of range)"
                                 % (int(offsets[-1]), n))
        if n and not unsigned and int(values.min()) < 0:
            i = int(torch.nonzero(values < 0)[0])
            raise ValueError("value %d is negative (%d): ids are unsigned "
                             "64-bit keys (for ids >= 2^63 pass uint64 or "
                             "unsigned=True)" % (i, int(values[i])))
        if weights is not None:
            weights = _tensor(weights, "weights")
            if weights.dtype != torch.float32:
                raise TypeError("weights must be float32, not %s"
                                % weights.dtype)
            if weights.numel() != n:
                raise ValueError("%d weights for %d values"
                                 % (weights.numel(), n))
        self._keys = keys
        self._unsigned = bool(unsigned)
        self._values = values
        self._offsets = offsets
        self._weights = weights
        self._batch = (offsets.numel() - 1) // len(keys)

    @classmethod
    def from_dict(cls, features):
        """{name: (values, lengths)} or {name: (values, lengths, weights)};
        every feature with the same batch size."""
        keys, vals, lens, wts = [], [], [], []
        weighted = None
        for name, t in features.items():
            if len(t) not in (2, 3):
                raise ValueError("feature %r: (values, lengths[, weights]) "
                                 "expected" % name)
            if weighted is None:
                weighted = len(t) == 3
            elif weighted != (len(t) == 3):
                raise ValueError("weights must be given for every feature "
                                 "or for none")
            keys.append(name)
            vals.append(_tensor(t[0], "values of %r" % name))
            lens.append(_tensor(t[1], "lengths of %r" % name).to(torch.int64))
            if weighted:
                wts.append(_tensor(t[2], "weights of %r" % name))
        if len({x.numel() for x in lens}) > 1:
            raise ValueError("features have different batch sizes: %s"
                             % {k: x.numel() for k, x in zip(keys, lens)})
        return cls(keys, torch.cat(vals), lengths=torch.cat(lens),
                   weights=torch.cat(wts) if weighted else None)

    def keys(self):
        return list(self._keys)

    def values(self):
        return self._values

    def weights(self):
        return self._weights

    def weights_or_none(self):
        return self._weights

    def unsigned(self):
        """True if values are the int64 bit patterns of uint64 ids."""
        return self._unsigned

    def offsets(self):
        return self._offsets

    def lengths(self):
        return self._offsets[1:] - self._offsets[:-1]

    def batch_size(self):
        return self._batch

    def feature(self, name):
        """(values, offsets, weights) of one feature; offsets are B + 1
        entries relative to the returned values."""
        try:
            f = self._keys.index(name)
        except ValueError:
            raise KeyError("no feature %r in this batch (it has %s)"
                           % (name, self._keys)) from None
        b = self._batch
        o = self._offsets[f * b:(f + 1) * b + 1]
        lo, hi = int(o[0]), int(o[-1])
        w = None if self._weights is None else self._weights[lo:hi]
        return self._values[lo:hi], o - lo, w

    def pin_memory(self):
        """A copy in pinned host memory (what a DataLoader with
        pin_memory=True calls)."""
        out = object.__new__(JaggedFeatures)
        out.__dict__.update(self.__dict__)
        out._values = self._values.pin_memory()
        out._offsets = self._offsets.pin_memory()
        if self._weights is not None:
            out._weights = self._weights.pin_memory()
        return out

    def __repr__(self):
        return ("JaggedFeatures(keys=%s, batch=%d, values=%d%s)"
                % (self._keys, self._batch, self._values.numel(),
                   ", weighted" if self._weights is not None else ""))
