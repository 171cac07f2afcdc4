"""PyTorch adapter: a goldminer Loader as a torch IterableDataset.

    from goldminer.torch import GoldminerDataset
    dataset = GoldminerDataset(epochs=1)
    for batch in torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=0):
        batch["image"], batch["label"]   # torch tensors sharing the batch's memory

Batches come already formed by the data workers, so give DataLoader batch_size=None
(or iterate the dataset directly) and no worker processes: the pre-processing
happens in goldminer's data workers, not in the trainer. Importing this module
imports torch; `import goldminer` alone does not.
"""

import torch
from torch.utils.data import IterableDataset

from goldminer.loader import Loader

__all__ = ["GoldminerDataset", "to_torch"]


def to_torch(batch):
    """A Loader batch dict with "image" and "label" as tensors (torch.from_numpy:
    no copy; the tensors keep the batch's buffer alive)."""
    return {"image": torch.from_numpy(batch["image"]), "label": torch.from_numpy(batch["label"]),
            "key": batch["key"]}


class GoldminerDataset(IterableDataset):
    """Yields this rank's batches as dicts of tensors; arguments as for Loader, or
    an existing `loader`. state_dict/load_state_dict forward to the Loader."""

    def __init__(self, epochs=1, coordinator=None, rank=None, world_size=None, loader=None):
        super().__init__()
        self.loader = loader if loader is not None else Loader(
            epochs=epochs, coordinator=coordinator, rank=rank, world_size=world_size)

    def __iter__(self):
        for batch in self.loader:
            yield to_torch(batch)

    def stats(self):
        return self.loader.stats()

    def state_dict(self):
        return self.loader.state_dict()

    def load_state_dict(self, state):
        self.loader.load_state_dict(state)
