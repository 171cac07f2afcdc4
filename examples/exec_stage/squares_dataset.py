"""A map-style dataset (anything with __getitem__, e.g. a torch Dataset) served by
    /usr/bin/python3 -m goldminer.dataset_stage squares_dataset:make
Each item is (x, y): x becomes the sample's tensor, y its label.
"""

import numpy as np


class Squares:
    def __len__(self):
        return 100

    def __getitem__(self, i):
        x = np.array([i, i * i], dtype=np.float32)
        return x, i % 10


def make():
    return Squares()
