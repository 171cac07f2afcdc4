"""The pipeline's stages "on": "device": what the trainer applies to each batch.

A pipeline may leave its last stages to the trainer (pipeline.json: a stage with
"on": "device", see goldminer-pipeline(5)); the workers then stop before them and
send what their last stage made, typically uint8 [n, H, W, 3] (HWC): a quarter of
the bytes of float32. The trainer applies the tail, on the GPU with
goldminer.torch.DeviceLoader, or with numpy in goldminer.Loader.

The ops, with the workers' arithmetic (worker/image/image_ops.cc), in float32:
  to_tensor {layout: "CHW"|"HWC", dtype: "float32"|"uint8"}
      uint8 -> float32: x / 255; float32 in [0, 1] -> uint8: round(clamp(x * 255));
      HWC <-> CHW moves the channel axis.
  normalize {mean: [3 numbers], std: [3 numbers]}
      uint8 x: x * (1 / (255 std)) + (-mean / std); float32 x in [0, 1]:
      x * (1 / std) + (-mean / std). Per channel; the result is float32.

`Tail` checks the stages once (TailError names the stage and what is wrong) and
then applies them to numpy arrays (`numpy`) or torch tensors (`torch`).
"""

import numpy as np

__all__ = ["Tail", "TailError"]


class TailError(ValueError):
    """A device stage this package cannot apply, or a batch it does not fit."""


def _f32(x):
    return np.float32(x)


class _Op:
    """One checked device stage."""

    def __init__(self, index, stage):
        self.index = index
        if not isinstance(stage, dict) or not isinstance(stage.get("op"), str):
            raise TailError(f"device stage {index}: expected an object with an \"op\", got {stage!r}")
        self.name = stage["op"]
        if self.name == "to_tensor":
            self.layout = stage.get("layout", "CHW")
            self.dtype = stage.get("dtype", "float32")
            if self.layout not in ("CHW", "HWC") or self.dtype not in ("float32", "uint8"):
                raise TailError(f"device stage {index} (to_tensor): layout must be \"CHW\" or "
                                f"\"HWC\" and dtype \"float32\" or \"uint8\", got {stage!r}")
        elif self.name == "normalize":
            mean, std = stage.get("mean"), stage.get("std")
            ok = all(isinstance(v, list) and len(v) == 3 and
                     all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v)
                     for v in (mean, std)) and all(x > 0 for x in std)
            if not ok:
                raise TailError(f"device stage {index} (normalize): mean and std must be 3 "
                                f"numbers each, std > 0, got {stage!r}")
            self.mean, self.std = mean, std
        else:
            raise TailError(f"device stage {index}: op \"{self.name}\" cannot run on the "
                            "trainer's device (only to_tensor and normalize can)")

    def coefficients(self, from_u8):
        """float32 scale and offset per channel: out = in * scale + offset (as
        NormalizeOp::Coefficients computes them, in double, then rounded)."""
        scale = [_f32(1.0 / ((255.0 if from_u8 else 1.0) * s)) for s in self.std]
        offset = [_f32(-m / s) for m, s in zip(self.mean, self.std)]
        return scale, offset


class Tail:
    """The device stages of a run (a list of stage dicts, as the client reports
    them). `empty` when there are none: batches are then used as received."""

    def __init__(self, stages):
        if not isinstance(stages, list):
            raise TailError(f"device stages must be a list, got {stages!r}")
        self.ops = [_Op(i, s) for i, s in enumerate(stages)]

    @property
    def empty(self):
        return not self.ops

    def _steps(self, layout, dtype):
        """Yields (op, from_layout, from_dtype, normalized) for each op after
        checking that it fits what came before it."""
        normalized = False
        for op in self.ops:
            if layout not in ("HWC", "CHW"):
                raise TailError(f"device stage {op.index} ({op.name}) needs an image batch "
                                f"(HWC or CHW), got layout {layout!r}")
            if dtype not in ("uint8", "float32"):
                raise TailError(f"device stage {op.index} ({op.name}) needs uint8 or float32, "
                                f"got {dtype}")
            if op.name == "normalize" and normalized:
                raise TailError(f"device stage {op.index}: the batch is already normalized")
            if op.name == "to_tensor" and op.dtype == "uint8" and normalized:
                raise TailError(f"device stage {op.index}: to_tensor to uint8 after normalize")
            yield op, layout, dtype, normalized
            if op.name == "normalize":
                dtype, normalized = "float32", True
            else:
                layout, dtype = op.layout, op.dtype

    def layout_after(self, layout):
        """The per-sample layout of a batch in `layout` once the tail is applied."""
        for op in self.ops:
            if op.name == "to_tensor":
                layout = op.layout
        return layout

    def numpy(self, image, layout):
        """Applies the tail to a numpy batch [n, ...] whose samples are in
        `layout` ("HWC" or "CHW"); returns a new array (float32 or uint8)."""
        x = image
        for op, lay, dtype, _ in self._steps(layout, str(image.dtype)):
            if x.ndim != 4 or (op.name == "normalize" and x.shape[3 if lay == "HWC" else 1] != 3):
                raise TailError(f"device stage {op.index} ({op.name}) needs [n, H, W, 3] or "
                                f"[n, 3, H, W], got {list(x.shape)}")
            if op.name == "normalize":
                scale, offset = op.coefficients(dtype == "uint8")
                shape = (1, 1, 1, 3) if lay == "HWC" else (1, 3, 1, 1)
                x = (x.astype(np.float32) * np.array(scale, np.float32).reshape(shape) +
                     np.array(offset, np.float32).reshape(shape))
            else:
                if dtype == "uint8" and op.dtype == "float32":
                    x = x.astype(np.float32) / np.float32(255.0)
                elif dtype == "float32" and op.dtype == "uint8":
                    x = np.rint(np.clip(x * np.float32(255.0), 0, 255)).astype(np.uint8)
                if lay != op.layout:
                    x = np.ascontiguousarray(np.moveaxis(x, 3, 1) if lay == "HWC"
                                             else np.moveaxis(x, 1, 3))
        return np.ascontiguousarray(x)

    def torch(self, image, layout, channels_last=False):
        """Applies the tail to a torch tensor [n, ...] on any device; returns a
        float32 (or uint8) tensor. With `channels_last`, a CHW result keeps the
        torch.channels_last memory format (an HWC batch moved to CHW is exactly
        that, so no copy is made for it); otherwise it is contiguous."""
        import torch
        x = image
        for op, lay, dtype, _ in self._steps(layout, str(image.dtype).replace("torch.", "")):
            if x.dim() != 4 or (op.name == "normalize" and x.shape[3 if lay == "HWC" else 1] != 3):
                raise TailError(f"device stage {op.index} ({op.name}) needs [n, H, W, C] or "
                                f"[n, C, H, W], got {list(x.shape)}")
            if op.name == "normalize":
                scale, offset = op.coefficients(dtype == "uint8")
                shape = (1, 1, 1, 3) if lay == "HWC" else (1, 3, 1, 1)
                s = torch.tensor(scale, dtype=torch.float32, device=x.device).reshape(shape)
                o = torch.tensor(offset, dtype=torch.float32, device=x.device).reshape(shape)
                x = x.to(torch.float32) * s + o
            else:
                if dtype == "uint8" and op.dtype == "float32":
                    x = x.to(torch.float32) / 255.0
                elif dtype == "float32" and op.dtype == "uint8":
                    x = torch.round(torch.clamp(x * 255.0, 0, 255)).to(torch.uint8)
                if lay != op.layout:
                    x = x.permute(0, 3, 1, 2) if lay == "HWC" else x.permute(0, 2, 3, 1)
        if channels_last and x.dim() == 4:
            return x.contiguous(memory_format=torch.channels_last)
        return x.contiguous()
