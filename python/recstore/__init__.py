"""recstore: embedding tables on RecStore memory nodes, for PyTorch trainers.

    import recstore

    client = recstore.Client("10.0.0.1:7471,10.0.0.2:7471")
    client.create_table("user", 64, optimizer="adagrad", lr=0.05,
                        init="uniform", init_a=0.01, exist_ok=True)
    ebc = recstore.EmbeddingBagCollection(client, [
        recstore.EmbeddingBagConfig("user", 64, ["user_id"]),
    ])
    pooled = ebc(recstore.JaggedFeatures(["user_id"], values, lengths=lengths))
    loss(pooled.values(), ...).backward()   # sends one UPDATE per distinct key

The native part (recstore._native) is a CPython extension over the client
library: rows move through numpy views of torch CPU tensors without copies,
and the GIL is released while a call waits for the network. See
docs/python.md.

recstore.__version__ is the project's version (the top CMakeLists.txt of
the tree the package was built from); recstore.version() is the
version of the client library loaded at run time. recstore.DEFAULT_PORT
is the port a node listens on unless told otherwise (the library's). The
core (Client, Table, CheckpointReader, the error codes) needs numpy only;
the torch modules (JaggedFeatures, EmbeddingBagCollection, ...) are
imported on first use.
"""

import importlib as _importlib
import importlib.util as _importlib_util
import sys as _sys

from ._native import DEFAULT_PORT, Error, strerror, version
from . import _native
from ._version import __version__
from .client import Client, Table, KeyFailure
from .checkpoint import CheckpointReader, verify

# The torch parts are imported on first use (PEP 562), so that the core
# above (numpy only) imports where torch is not installed: the first
# recstore.EmbeddingBagCollection imports recstore.embedding (and torch);
# without torch it raises an ImportError that says so.
_LAZY = {
    "JaggedFeatures": "jagged",
    "EmbeddingBagConfig": "embedding",
    "EmbeddingBagCollection": "embedding",
    "PooledEmbeddings": "embedding",
    "TrainPipeline": "pipeline",
    "collate_jagged": "pipeline",
}
_SUBMODULES = ("jagged", "embedding", "pipeline")


def _has(module):
    """Whether module can be found, without importing it."""
    if module in _sys.modules:
        return True
    try:
        return _importlib_util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def __getattr__(name):
    sub = _LAZY.get(name, name if name in _SUBMODULES else None)
    if sub is None:
        raise AttributeError("module 'recstore' has no attribute '%s'" % name)
    try:
        mod = _importlib.import_module("." + sub, __name__)
    except ImportError as e:
        if (e.name or "").partition(".")[0] == "torch":
            raise ImportError(
                "recstore.%s needs PyTorch, which cannot be imported (%s). "
                "Install torch (Debian: python3-torch); the core "
                "(recstore.Client, Table, CheckpointReader) works without "
                "it." % (name, e), name=e.name) from e
        if e.name == __name__ + "." + sub:  # not in this version
            raise AttributeError("module 'recstore' has no attribute '%s'"
                                 % name) from None
        raise
    value = mod if name == sub else getattr(mod, name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))


__all__ = [
    "Client", "Table", "Error", "KeyFailure", "strerror", "version",
    "CheckpointReader", "verify", "DEFAULT_PORT",
]
# The torch names when torch is there (so that `from recstore import *`
# works without it), and the pipeline's when this version has it.
if _has("torch"):
    __all__ += [n for n, m in _LAZY.items()
                if m != "pipeline" or _has(__name__ + ".pipeline")]

# Error codes of the library (recstore/error.h), e.g. recstore.E_NOTFOUND.
for _name in dir(_native):
    if _name.startswith(("E_", "KEY_")):
        globals()[_name] = getattr(_native, _name)
del _name
