"""Federated TextHide on Flower 1.41 (Huang et al. 2020, Sec. 3.4 and Algorithm 2).

Each client encrypts its own batches with its own secret mask pool and sends
only the head's weights; the server averages them (FedAvg). Modules:

* :mod:`~veil.federated.config`: :class:`FederatedConfig` (the run, no secrets);
* :mod:`~veil.federated.partition`: IID and per-class Dirichlet partitions;
* :mod:`~veil.federated.data`: a client's partition of frozen MiniLM vectors;
* :mod:`~veil.federated.client`: local training and evaluation (no Flower);
* :mod:`~veil.federated.server`: aggregation and the eavesdropper tap (no Flower);
* :mod:`~veil.federated.reference`: the in-process reference loop;
* :mod:`~veil.federated.apps`: the Flower ClientApp and ServerApp (imports flwr);
* :mod:`~veil.federated.run`: simulation driver and result records.

Flower is imported only by ``apps`` and ``run``, so ``import veil.federated`` stays light.
"""

from veil.federated.config import CLIENT_MODES, FederatedConfig
from veil.federated.partition import partition_indices

__all__ = ["FederatedConfig", "CLIENT_MODES", "partition_indices"]
