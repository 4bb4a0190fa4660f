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
"""

from ._native import Error, strerror, version
from . import _native
from .client import Client, Table, KeyFailure
from .checkpoint import CheckpointReader, verify
from .jagged import JaggedFeatures
from .embedding import EmbeddingBagConfig, EmbeddingBagCollection, PooledEmbeddings

__all__ = [
    "Client", "Table", "Error", "KeyFailure", "JaggedFeatures",
    "EmbeddingBagConfig", "EmbeddingBagCollection", "PooledEmbeddings",
    "strerror", "version", "CheckpointReader", "verify",
]

# Error codes of the library (recstore/error.h), e.g. recstore.E_NOTFOUND.
for _name in dir(_native):
    if _name.startswith(("E_", "KEY_")):
        globals()[_name] = getattr(_native, _name)
del _name
