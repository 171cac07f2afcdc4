"""goldminer: Python side of the goldminer data-worker toolchain.

goldminer.Loader         this trainer rank's batches from a `goldminer run`
                         (ctypes over libgoldminer_client.so; numpy only)
goldminer.torch          the Loader as a torch IterableDataset (imports torch)
goldminer.stage          serve a Python function as an `exec` pipeline stage
goldminer.dataset_stage  serve a map-style (PyTorch) dataset as an `exec` stage
"""

from goldminer.loader import ClientError, Loader

__all__ = ["Loader", "ClientError", "stage", "dataset_stage"]
