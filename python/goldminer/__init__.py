"""goldminer: Python side of the goldminer data-worker toolchain.

goldminer.Loader         this trainer rank's batches from a `goldminer run`
                         (ctypes over libgoldminer_client.so; numpy only)
goldminer.torch          the Loader as a torch IterableDataset (imports torch)
goldminer.stage          serve a Python function as an `exec` pipeline stage
goldminer.dataset_stage  serve a map-style (PyTorch) dataset as an `exec` stage
goldminer.offload        runs an unchanged PyTorch program's DataLoader workers as
                         virtual workers in goldminer's data workers (or on this
                         host: GOLDMINER_OFFLOAD=local); installed by `goldminer
                         run` for the program (its import hook, once the program
                         imports torch's DataLoader), not by `import goldminer`
"""

from goldminer.loader import ClientError, Loader

__all__ = ["Loader", "ClientError", "stage", "dataset_stage"]
