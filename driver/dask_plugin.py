"""The Dask worker plugin of ``--engine dask`` without ``--address`` (imported only then:
it needs ``distributed``)."""

from __future__ import annotations

import os

from distributed.diagnostics.plugin import WorkerPlugin

from .executors import pin_env


class PinGpu(WorkerPlugin):
    """Pins each worker of a LocalCluster to its GPU by the worker's name (``{name: GPU id}``):
    sets ``CUDA_VISIBLE_DEVICES``/``HIP_VISIBLE_DEVICES`` in the worker process before it runs
    a task, so the timing and verification workers it starts see that GPU only."""

    name = "dgrad-pin-gpu"

    def __init__(self, gpus: dict):
        self.gpus = {str(k): v for k, v in gpus.items()}

    def setup(self, worker) -> None:
        gpu = self.gpus.get(str(worker.name))
        if gpu is not None:
            os.environ.update(pin_env(gpu))


__all__ = ["PinGpu"]
