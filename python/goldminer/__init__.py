"""goldminer: Python side of the goldminer data-worker toolchain.

goldminer.stage          serve a Python function as an `exec` pipeline stage
goldminer.dataset_stage  serve a map-style (PyTorch) dataset as an `exec` stage
"""

__all__ = ["stage", "dataset_stage"]
