"""PyTorch adapter: a goldminer Loader as a torch IterableDataset.

    from goldminer.torch import GoldminerDataset
    dataset = GoldminerDataset(epochs=1)
    for batch in torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=0):
        batch["image"], batch["label"]   # torch tensors sharing the batch's memory

Batches come already formed by the data workers, so give DataLoader batch_size=None
(or iterate the dataset directly) and no worker processes: the pre-processing
happens in goldminer's data workers, not in the trainer. Importing this module
imports torch; `import goldminer` alone does not.

To keep a GPU busy, use DeviceLoader instead: it copies each batch to the device
on a side stream while the previous step computes, and applies the pipeline's
stages "on": "device" (uint8 -> float, normalize) there, so only uint8 crosses
the wire and the host:

    from goldminer.torch import DeviceLoader
    for batch in DeviceLoader(device="cuda", prefetch=2, channels_last=True, epochs=3):
        batch["image"], batch["label"]   # tensors on the device
"""

import collections
import queue
import threading

import torch
from torch.utils.data import IterableDataset

from goldminer.loader import Loader

__all__ = ["DeviceLoader", "GoldminerDataset", "to_torch"]


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


_END = object()  # the background thread's last item


class _Cuda:
    """The CUDA calls DeviceLoader makes, in one place: what it does on a GPU is
    these one-line forwards plus the order it calls them in, which the unit tests
    check with a fake of this class on machines without one."""

    def __init__(self, device):
        self.device = device

    def stream(self):
        return torch.cuda.Stream(self.device)

    def use(self, stream):
        return torch.cuda.stream(stream)

    def event(self):
        return torch.cuda.Event()

    def current_stream(self):
        return torch.cuda.current_stream(self.device)

    def pinned(self, shape, dtype):
        return torch.empty(shape, dtype=dtype, pin_memory=True)

    def to_device(self, tensor):
        return tensor.to(self.device, non_blocking=True)

    def record(self, tensor, stream):
        tensor.record_stream(stream)


class _Failed:
    def __init__(self, error):
        self.error = error


class DeviceLoader:
    """Yields this rank's batches as dicts of tensors on `device`: "image" (the
    pipeline's device stages applied there), "label" (int64), "key", "epoch".

    device: "cuda", "cuda:N", a torch.device, or "cpu" (no CUDA: the tail runs on
    the CPU with torch; what CI tests). prefetch: batches copied ahead (on CUDA,
    host-to-device copies of the next batches run on a side stream, overlapped
    with the trainer's compute; each is staged once in page-locked memory, a ring
    of prefetch + 1 buffers per batch shape). channels_last: an image batch in CHW
    comes in torch.channels_last memory format (free when the workers send HWC).
    thread: receive, stage and copy in a background thread, so the trainer's
    thread only takes ready batches (default: on CUDA yes, else no); the Loader
    is then used from that thread only. Errors of the Loader are raised in the
    trainer's thread. Other arguments as for goldminer.Loader, or an existing
    `loader` (made with tail=False). A batch yielded stays valid while the caller
    holds it; on CUDA it is ready on the current stream when yielded (the copy is
    waited for there).
    """

    def __init__(self, device="cuda", prefetch=2, channels_last=False, epochs=1,
                 coordinator=None, rank=None, world_size=None, loader=None, thread=None):
        self.device = torch.device(device)
        if self.device.type == "cuda" and not torch.cuda.is_available():
            raise RuntimeError(f"DeviceLoader: device {device!r} asked for, but torch sees no "
                               "CUDA device; use device=\"cpu\"")
        if int(prefetch) < 1:
            raise ValueError(f"DeviceLoader: prefetch must be at least 1, not {prefetch!r}")
        self.prefetch = int(prefetch)
        self._cuda = _Cuda(self.device) if self.device.type == "cuda" else None
        # A background thread feeds by default on CUDA (see _iter_threaded).
        self.thread = self.device.type == "cuda" if thread is None else bool(thread)
        self.channels_last = bool(channels_last)
        self.loader = loader if loader is not None else Loader(
            epochs=epochs, coordinator=coordinator, rank=rank, world_size=world_size, tail=False)
        if getattr(self.loader, "_apply_tail", False):
            raise ValueError("DeviceLoader: pass a Loader made with tail=False (the device "
                             "loader applies the device stages itself)")
        self._pinned = collections.defaultdict(list)  # (shape, dtype) -> [(tensor, event)]
        self._turn = collections.Counter()
        # The Loader's state just after the last batch yielded to the trainer was
        # received (None before the first): what state_dict() reports, so that the
        # batches prefetched beyond it are not counted as consumed.
        self._state = None

    def _receive(self, batch, stream):
        """What travels from receipt to _ready: the batch, its device tensors and
        copy event, and the Loader's state right after the batch was received."""
        return (batch,) + self._to_device(batch, stream) + (self.loader.state_dict(),)

    def _stage(self, array):
        """A page-locked copy of `array` from this shape's ring: the buffer is
        reused only once the copy that last read it has finished."""
        key = (tuple(array.shape), str(array.dtype))
        ring, i = self._pinned[key], self._turn[key] % (self.prefetch + 1)
        self._turn[key] += 1
        if i == len(ring):
            ring.append([self._cuda.pinned(array.shape, torch.from_numpy(array[:0]).dtype), None])
        buf, event = ring[i]
        if event is not None:
            event.synchronize()
        buf.copy_(torch.from_numpy(array))
        return ring[i]

    def _finish(self, image, layout):
        """The device stages applied to `image` (on its device), or, without
        any, the channels_last format asked for a CHW batch."""
        tail = self.loader.tail
        if not tail.empty:
            return tail.torch(image, layout, self.channels_last)
        if self.channels_last and image.dim() == 4 and layout == "CHW":
            return image.contiguous(memory_format=torch.channels_last)
        return image

    def _to_device(self, batch, stream):
        if self._cuda is None:
            image = self._finish(torch.from_numpy(batch["image"]), batch["layout"])
            return image, torch.from_numpy(batch["label"]).to(self.device), None
        image_slot = self._stage(batch["image"])
        label_slot = self._stage(batch["label"])
        with self._cuda.use(stream):
            image = self._cuda.to_device(image_slot[0])
            label = self._cuda.to_device(label_slot[0])
            image = self._finish(image, batch["layout"])
            done = self._cuda.event()
            done.record(stream)
        image_slot[1] = label_slot[1] = done
        return image, label, done

    def __iter__(self):
        if self.thread:
            yield from self._iter_threaded()
            return
        stream = self._cuda.stream() if self._cuda is not None else None
        ahead = collections.deque()
        source = iter(self.loader)
        exhausted = False
        while True:
            while not exhausted and len(ahead) < self.prefetch:
                try:
                    batch = next(source)
                except StopIteration:
                    exhausted = True
                    break
                ahead.append(self._receive(batch, stream))
            if not ahead:
                return
            yield self._ready(*ahead.popleft())

    def _ready(self, batch, image, label, done, state):
        """The batch as yielded: on CUDA, the current stream waits for its copy."""
        self._state = state
        if done is not None:
            current = self._cuda.current_stream()
            current.wait_event(done)
            self._cuda.record(image, current)
            self._cuda.record(label, current)
        return {"image": image, "label": label, "key": batch["key"], "epoch": batch["epoch"]}

    def _iter_threaded(self):
        """A background thread receives, stages and issues the copies (the
        client, the page-locked copy and the tail's kernels run there, outside
        the trainer's thread); the trainer's thread only takes ready batches."""
        ready = queue.Queue(maxsize=self.prefetch)
        stop = threading.Event()

        def put(item):
            while not stop.is_set():
                try:
                    ready.put(item, timeout=0.1)
                    return True
                except queue.Full:
                    continue
            return False

        def produce():
            try:
                stream = self._cuda.stream() if self._cuda is not None else None
                for batch in self.loader:
                    if not put(self._receive(batch, stream)):
                        return
                put(_END)
            except BaseException as e:  # handed to the trainer's thread, raised there
                put(_Failed(e))

        worker = threading.Thread(target=produce, name="goldminer-device-loader", daemon=True)
        worker.start()
        try:
            while True:
                item = ready.get()
                if item is _END:
                    return
                if isinstance(item, _Failed):
                    raise item.error
                yield self._ready(*item)
        finally:
            stop.set()
            worker.join()

    def stats(self):
        return self.loader.stats()

    def state_dict(self):
        """Where the trainer stands, for a checkpoint: the Loader's state as it was
        just after the last batch this loader yielded was received, so batches
        prefetched but not yet yielded come again after a resume (the same
        dict as goldminer.Loader.state_dict()). Take it from the trainer's thread,
        between steps."""
        if self._state is not None:
            return dict(self._state)
        return self.loader.state_dict()

    def load_state_dict(self, state):
        self._state = None
        self.loader.load_state_dict(state)
