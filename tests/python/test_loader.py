"""Unit tests of goldminer.Loader and goldminer.torch over the real
libgoldminer_client.so, against a fake coordinator and a fake data worker written
here (GMP1 frames and the HMAC handshake of dataplane/auth.h, in Python).

The library must be built first (cmake --build BUILD --target goldminer_client);
without it these tests fail, saying so. Run:
/usr/bin/python3 -m unittest discover -s tests/python
"""

import gc
import json
import os
import socket
import struct
import sys
import threading
import unittest

import numpy as np

PYTHON_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python")
sys.path.insert(0, os.path.normpath(PYTHON_DIR))

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from gmp_wire import (HEADER, recv_exact, recv_frame, role_key, send_frame,  # noqa: E402,F401
                      server_handshake as wire_server_handshake, ticket_key)

import goldminer  # noqa: E402
from goldminer import loader as loader_module  # noqa: E402

SECRET = "ab" * 32  # the run's secret, held by the fake coordinator
CLIENT_KEY = role_key(SECRET, "client")  # what the trainer holds
WORKER_KEY = role_key(SECRET, "worker")
SESSION = 7  # the session number the fake coordinator gives
TIMEOUT_S = 20  # every socket wait in the fakes ends by then
SUBSCRIBE, CREDIT, BATCH, BYE, SUBSCRIBED = 24, 25, 26, 28, 29
ACK, GET_PLAN, PLAN, GET_WORKERS, WORKERS, RESUME = 23, 30, 31, 32, 33, 34


def server_handshake(sock, role):
    """As the fake coordinator (clients prove the client key) or the fake worker
    (clients prove the ticket of rank 0, session SESSION)."""
    def key_for(claimed):
        if role == "coordinator":
            return CLIENT_KEY if claimed == "client" else None
        return ticket_key(WORKER_KEY, 0, SESSION) if claimed == "client:0:%d" % SESSION else None
    return wire_server_handshake(sock, key_for, role) is not None


class FakeServer:
    """Serves the first connection on a thread with `serve(sock)` after the handshake."""

    def __init__(self, role, serve):
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(TIMEOUT_S)
        self.address = "127.0.0.1:%d" % self.listener.getsockname()[1]
        self.thread = threading.Thread(target=self._run, args=(role, serve), daemon=True)
        self.thread.start()

    def _run(self, role, serve):
        try:
            conn, _ = self.listener.accept()
            conn.settimeout(TIMEOUT_S)
            with conn:
                if server_handshake(conn, role):
                    serve(conn)
        except (OSError, ConnectionError):
            pass  # the client left; the test checks what it received

    def close(self):
        try:
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes a pending accept (Linux)
        except OSError:
            pass
        self.listener.close()
        self.thread.join(TIMEOUT_S)


def make_batches():
    """Two splits (7, 3) of two batches of two 4x4x3 uint8 images each."""
    batches = []
    for split in (7, 3):
        for split_batch in range(2):
            base = len(batches) * 2
            image = np.arange(2 * 48, dtype=np.uint8).reshape(2, 4, 4, 3) + base
            batches.append({"split": split, "split_batch": split_batch, "image": image,
                            "label": np.array([base, base + 1], dtype=np.int64),
                            "key": ["s%d-%d" % (split, base), "s%d-%d" % (split, base + 1)]})
    return batches


def serve_worker(batches):
    def serve(sock):
        assert recv_frame(sock)[0] == SUBSCRIBE
        credit = 0
        for i, b in enumerate(batches):
            while credit == 0:
                msg_type, meta, _ = recv_frame(sock)
                if msg_type == CREDIT:
                    credit += meta["n"]
            meta = {"epoch": 0, "index": i, "split": b["split"], "split_batch": b["split_batch"],
                    "dtype": "uint8", "shape": list(b["image"].shape), "layout": "HWC", "n": 2,
                    "keys": b["key"], "sample_indices": [int(b["label"][0]), int(b["label"][1])], "data_bytes": b["image"].nbytes,
                    "labels_bytes": 16, "rank": 0}
            if b["split_batch"] == 1:
                meta["split_batches"] = 2
            send_frame(sock, BATCH, meta, b["image"].tobytes() + b["label"].tobytes())
            credit -= 1
        while True:
            recv_frame(sock)
    return serve


ORDER = "ab" * 32  # the fake run's batch order


def serve_coordinator(worker_address, log, count=-1, device_stages=None):
    def serve(sock):
        while True:
            msg_type, meta, _ = recv_frame(sock)
            log.append((msg_type, meta))
            if msg_type == SUBSCRIBE:
                subscribed = {"run_id": "t", "batch_size": 2, "world_size": 1, "epochs": 1,
                              "session": SESSION, "ticket": ticket_key(WORKER_KEY, 0, SESSION),
                              "order": ORDER, "seed": 11}
                if device_stages is not None:
                    subscribed["device_stages"] = device_stages
                send_frame(sock, SUBSCRIBED, subscribed)
            elif msg_type in (GET_PLAN, RESUME):  # RESUME is answered with the epoch's PLAN
                send_frame(sock, PLAN, {"epoch": meta["epoch"], "splits": [[7, count], [3, count]],
                                        "workers": [worker_address]})
            elif msg_type == GET_WORKERS:
                # The one worker holds both splits (the client delivers only the holders' batches).
                send_frame(sock, WORKERS, {"workers": [worker_address], "epoch": 0, "holders": [[7, 0], [3, 0]]})
            elif msg_type == BYE:
                return
    return serve


class LibraryTest(unittest.TestCase):
    def test_given_the_build_then_the_client_library_loads_with_its_abi(self):
        try:
            path = loader_module.library_path()
        except FileNotFoundError as e:
            self.fail(str(e))
        self.assertTrue(os.path.exists(path), "%s does not exist: build target goldminer_client" % path)
        from goldminer import _client_lib
        self.assertEqual(_client_lib.library().gm_abi_version(), 1)

    def test_given_an_unreachable_coordinator_then_the_error_names_it(self):
        os.environ["GOLDMINER_SECRET"] = CLIENT_KEY
        with self.assertRaises(goldminer.ClientError) as caught:
            iter(goldminer.Loader(coordinator="127.0.0.1:1", rank=0, world_size=1)).__next__()
        self.assertIn("127.0.0.1:1", str(caught.exception))
        self.assertEqual(caught.exception.code, 5)  # GM_UNAVAILABLE

    def test_given_a_bad_address_then_the_error_says_what_is_expected(self):
        os.environ["GOLDMINER_SECRET"] = CLIENT_KEY
        with self.assertRaises(goldminer.ClientError) as caught:
            goldminer.Loader(coordinator="nowhere", rank=0, world_size=1).stats()
        self.assertIn("HOST:PORT", str(caught.exception))


class FakeRunTest(unittest.TestCase):
    """A fake worker serving make_batches() and a fake coordinator pointing at it
    (serve_coordinator with COORDINATOR's options), made for each test."""

    COORDINATOR = {}

    def setUp(self):
        os.environ["GOLDMINER_SECRET"] = CLIENT_KEY
        self.batches = make_batches()
        self.worker = FakeServer("worker", serve_worker(self.batches))
        self.log = []
        self.coordinator = FakeServer("coordinator", serve_coordinator(
            self.worker.address, self.log, **self.COORDINATOR))

    def tearDown(self):
        self.coordinator.close()
        self.worker.close()


class LoaderTest(FakeRunTest):

    def test_given_a_run_when_iterated_then_batches_arrive_in_order_as_zero_copy_arrays(self):
        loader = goldminer.Loader(epochs=1, coordinator=self.coordinator.address, rank=0, world_size=1)
        got = list(loader)
        self.assertEqual([b["key"] for b in got], [b["key"] for b in self.batches])
        for mine, want in zip(got, self.batches):
            np.testing.assert_array_equal(mine["image"], want["image"])
            np.testing.assert_array_equal(mine["label"], want["label"])
            self.assertEqual(mine["label"].dtype, np.int64)
            self.assertFalse(mine["image"].flags.owndata)  # a view of the library's buffer
        state = loader.state_dict()
        self.assertEqual((state["epoch"], state["position"], state["split_index"]), (0, 4, 2))
        stats = loader.stats()
        self.assertEqual((stats["batches"], stats["samples"]), (4, 8))
        self.assertGreater(stats["data_wait_s"], 0.0)
        image = got[3]["image"]
        loader.close()
        del got
        gc.collect()  # the array outlives the client and its batch dict, intact
        np.testing.assert_array_equal(image, self.batches[3]["image"])
        self.coordinator.close()  # returns once the coordinator has read BYE
        acks = [pair for t, meta in self.log if t == ACK for pair in meta["batches"]]
        self.assertEqual(acks, [[7, 0], [7, 1], [3, 0], [3, 1]])

    def test_given_a_state_dict_when_loaded_then_iteration_resumes_after_it(self):
        counted = FakeServer("coordinator", serve_coordinator(self.worker.address, self.log, count=2))
        loader = goldminer.Loader(epochs=1, coordinator=counted.address, rank=0, world_size=1)
        loader.load_state_dict({"epoch": 0, "position": 2})
        self.assertEqual(loader.state_dict(), {"epoch": 0, "position": 2})
        keys = [b["key"] for b in loader]
        self.assertEqual(keys, [b["key"] for b in self.batches[2:]])
        self.assertEqual(loader.stats()["duplicates_dropped"], 2)
        loader.close()
        counted.close()
        self.assertIn((RESUME, {"epoch": 0, "position": 2}), self.log)

    def test_given_a_full_state_dict_then_it_names_the_run_and_resumes_in_a_new_loader(self):
        # Counts are unknown (-1): the state's split index lets a new loader resume.
        first = goldminer.Loader(epochs=1, coordinator=self.coordinator.address, rank=0, world_size=1)
        it = iter(first)
        keys = [next(it)["key"] for _ in range(3)]
        state = first.state_dict()
        self.assertEqual(state, {"epoch": 0, "position": 3, "split_index": 1, "split_batch": 1,
                                 "order": ORDER, "seed": 11, "world_size": 1, "rank": 0})
        del it
        first.close()
        # A new run: another coordinator and worker, which knows no count either.
        worker = FakeServer("worker", serve_worker(self.batches))
        run = FakeServer("coordinator", serve_coordinator(worker.address, self.log))
        second = goldminer.Loader(epochs=1, coordinator=run.address, rank=0, world_size=1)
        second.load_state_dict(json.loads(json.dumps(state)))  # survives a JSON checkpoint
        keys += [b["key"] for b in second]
        self.assertEqual(keys, [b["key"] for b in self.batches])
        second.close()
        run.close()
        worker.close()
        self.assertIn((RESUME, {"epoch": 0, "position": 3, "split_index": 1, "split_batch": 1}),
                      self.log)
        run = FakeServer("coordinator", serve_coordinator(self.worker.address, self.log))
        other = goldminer.Loader(epochs=1, coordinator=run.address, rank=0, world_size=1)
        other.load_state_dict(dict(state, order="cd" * 32))
        with self.assertRaises(goldminer.ClientError) as caught:
            next(iter(other))
        self.assertIn("belongs to another pipeline", str(caught.exception))
        other.close()
        run.close()

    def test_given_something_that_is_not_a_state_then_load_state_dict_says_what_is_wrong(self):
        loader = goldminer.Loader(epochs=1, coordinator=self.coordinator.address, rank=0, world_size=1)
        for bad, why in [([0, 2], "dict from state_dict"), ({"epoch": 0}, "lacks position"),
                         ({"epoch": 0, "position": -1}, "position must be"),
                         ({"epoch": 0, "position": 1, "split_index": 0}, "lacks split_batch"),
                         ({"epoch": 0, "position": 1, "split_index": 0, "split_batch": 1,
                           "order": "zz", "seed": 1, "world_size": 1, "rank": 0}, "order must be")]:
            with self.assertRaises(ValueError) as caught:
                loader.load_state_dict(bad)
            self.assertIn(why, str(caught.exception))

    def test_given_the_torch_adapter_then_batches_are_tensors_sharing_memory(self):
        import torch
        from goldminer.torch import GoldminerDataset
        dataset = GoldminerDataset(epochs=1, coordinator=self.coordinator.address, rank=0, world_size=1)
        got = list(torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=0))
        self.assertEqual(len(got), 4)
        self.assertIsInstance(got[0]["image"], torch.Tensor)
        self.assertEqual(got[0]["image"].dtype, torch.uint8)
        self.assertEqual(got[2]["label"].tolist(), self.batches[2]["label"].tolist())
        self.assertTrue(torch.equal(got[1]["image"], torch.from_numpy(self.batches[1]["image"])))
        dataset.loader.close()


MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
TAIL = [{"op": "normalize", "mean": MEAN, "std": STD},
        {"op": "to_tensor", "layout": "CHW", "dtype": "float32"}]


def reference_tail(image):
    """What the workers' normalize + to_tensor (CHW float32) make of a uint8 HWC
    batch, element by element in float32 as worker/image/image_ops.cc computes it."""
    out = np.empty((image.shape[0], 3, image.shape[1], image.shape[2]), np.float32)
    for c in range(3):
        scale = np.float32(1.0 / (255.0 * STD[c]))
        offset = np.float32(-MEAN[c] / STD[c])
        out[:, c] = image[..., c].astype(np.float32) * scale + offset
    return out


class FakeStream:
    def __init__(self, name):
        self.name = name
        self.waited = []    # events this stream waited for, in order
        self.recorded = []  # ids of the tensors recorded on it, in order

    def wait_event(self, event):
        self.waited.append(event)


class FakeEvent:
    def __init__(self, cuda):
        self.cuda = cuda
        self.done = False
        self.reads = []

    def record(self, stream):
        if stream is not self.cuda.active:
            self.cuda.errors.append("an event recorded outside the side stream")
        # The copies issued since the last event are what this one marks.
        self.reads, self.cuda.pending = self.cuda.pending, []
        for ptr in self.reads:
            self.cuda.last_copy[ptr] = self
        for t in self.cuda.outputs:
            self.cuda.copy_of[t] = self
        self.cuda.outputs = []

    def synchronize(self):
        self.done = True


class FakeCuda:
    """goldminer.torch._Cuda's calls on the CPU, checking the order they come in."""

    def __init__(self):
        self.main = FakeStream("main")
        self.active = None      # the stream in use (use())
        self.buffers = set()    # data_ptr of each page-locked buffer made
        self.last_copy = {}     # buffer -> the event of the copy that last read it
        self.copy_of = {}       # id of a copied (device) tensor -> its copy's event
        self.pending, self.outputs = [], []
        self.reuses = 0
        self.errors = []

    def stream(self):
        return FakeStream("side")

    def use(self, stream):
        import contextlib

        @contextlib.contextmanager
        def using():
            self.active = stream
            try:
                yield
            finally:
                self.active = None
        return using()

    def event(self):
        return FakeEvent(self)

    def current_stream(self):
        return self.main

    def pinned(self, shape, dtype):
        import torch
        t = torch.empty(shape, dtype=dtype)
        self.buffers.add(t.data_ptr())
        return t

    def to_device(self, tensor):
        ptr = tensor.data_ptr()
        if ptr not in self.buffers:
            self.errors.append("a copy from memory that is not page-locked")
        if self.active is None or self.active is self.main:
            self.errors.append("a copy outside the side stream")
        before = self.last_copy.get(ptr)
        if before is not None:
            self.reuses += 1
            if not before.done:
                self.errors.append("a buffer refilled before the copy that read it finished")
        self.pending.append(ptr)
        out = tensor.clone()  # the "device" copy
        self.outputs.append(id(out))
        return out

    def record(self, tensor, stream):
        stream.recorded.append(id(tensor))


class DeviceTailTest(FakeRunTest):
    """A run whose pipeline leaves normalize and to_tensor "on": "device"."""

    COORDINATOR = {"device_stages": TAIL}

    def test_given_device_stages_then_the_loader_applies_them_with_numpy(self):
        loader = goldminer.Loader(epochs=1, coordinator=self.coordinator.address, rank=0, world_size=1)
        self.assertEqual(loader.device_stages, TAIL)
        got = list(loader)
        self.assertEqual([b["key"] for b in got], [b["key"] for b in self.batches])
        for mine, want in zip(got, self.batches):
            self.assertEqual((mine["image"].dtype, mine["image"].shape, mine["layout"]),
                             (np.float32, (2, 3, 4, 4), "CHW"))
            np.testing.assert_allclose(mine["image"], reference_tail(want["image"]), rtol=0, atol=1e-6)
            np.testing.assert_array_equal(mine["label"], want["label"])
        loader.close()

    def test_given_device_stages_then_the_device_loader_on_cpu_matches_the_cpu_pipeline(self):
        import torch
        from goldminer.torch import DeviceLoader
        loader = DeviceLoader(device="cpu", prefetch=2, channels_last=True, epochs=1,
                              coordinator=self.coordinator.address, rank=0, world_size=1)
        got = list(loader)
        self.assertEqual([b["key"] for b in got], [b["key"] for b in self.batches])
        for mine, want in zip(got, self.batches):
            image = mine["image"]
            self.assertEqual((image.dtype, tuple(image.shape), image.device.type),
                             (torch.float32, (2, 3, 4, 4), "cpu"))
            self.assertTrue(image.is_contiguous(memory_format=torch.channels_last))
            np.testing.assert_allclose(image.numpy(), reference_tail(want["image"]), rtol=0, atol=1e-6)
            self.assertEqual(mine["label"].tolist(), want["label"].tolist())
        self.assertEqual(loader.stats()["batches"], 4)
        loader.loader.close()

    def test_given_a_background_thread_then_the_same_batches_arrive_in_order(self):
        import torch
        from goldminer.torch import DeviceLoader
        loader = DeviceLoader(device="cpu", prefetch=1, epochs=1, thread=True,
                              coordinator=self.coordinator.address, rank=0, world_size=1)
        got = list(loader)
        self.assertEqual([b["key"] for b in got], [b["key"] for b in self.batches])
        for mine, want in zip(got, self.batches):
            self.assertEqual(mine["image"].dtype, torch.float32)
            np.testing.assert_allclose(mine["image"].numpy(), reference_tail(want["image"]),
                                       rtol=0, atol=1e-6)
        loader.loader.close()

    def check_state_after_two_batches(self, thread):
        from goldminer.torch import DeviceLoader
        loader = DeviceLoader(device="cpu", prefetch=3, epochs=1, thread=thread,
                              coordinator=self.coordinator.address, rank=0, world_size=1)
        it = iter(loader)
        keys = [next(it)["key"] for _ in range(2)]
        self.assertEqual(keys, [b["key"] for b in self.batches[:2]])
        state = loader.state_dict()
        if not thread:  # (the background thread's Loader is its own to ask)
            # The client has received more than 2 (prefetched), the trainer only 2.
            self.assertGreater(loader.loader.state_dict()["position"], 2)
        self.assertEqual((state["epoch"], state["position"], state["split_index"],
                          state["split_batch"]), (0, 2, 1, 0))
        del it
        loader.loader.close()

    def test_given_prefetched_batches_then_the_device_loaders_state_counts_only_those_yielded(self):
        self.check_state_after_two_batches(thread=False)

    def test_given_a_background_thread_then_the_state_counts_only_batches_yielded(self):
        self.check_state_after_two_batches(thread=True)

    def test_given_a_failing_loader_in_the_background_then_the_trainer_gets_its_error(self):
        from goldminer.torch import DeviceLoader
        loader = DeviceLoader(device="cpu", thread=True, coordinator="127.0.0.1:1", rank=0,
                              world_size=1)
        with self.assertRaises(goldminer.ClientError) as caught:
            next(iter(loader))
        self.assertIn("127.0.0.1:1", str(caught.exception))

    def check_cuda_path(self, thread, prefetch):
        """The CUDA path's orchestration, with a fake of goldminer.torch._Cuda: the
        copies read page-locked buffers only, on the side stream; a buffer is
        refilled only after the copy that last read it has finished; the ring is
        bounded; each batch yielded makes the trainer's stream wait for its copy
        and records its tensors on that stream; values as the CPU pipeline's."""
        import torch
        from goldminer.torch import DeviceLoader
        fake = FakeCuda()
        loader = DeviceLoader(device="cpu", prefetch=prefetch, epochs=1, thread=thread,
                              coordinator=self.coordinator.address, rank=0, world_size=1)
        loader._cuda = fake
        got = []
        for batch in loader:
            # Ready when yielded: the trainer's stream waited for this batch's copy.
            self.assertIs(fake.main.waited[-1], fake.copy_of[id(batch["label"])])
            self.assertEqual(fake.main.recorded[-2:], [id(batch["image"]), id(batch["label"])])
            got.append(batch)
        self.assertEqual([b["key"] for b in got], [b["key"] for b in self.batches])
        for mine, want in zip(got, self.batches):
            np.testing.assert_allclose(mine["image"].numpy(), reference_tail(want["image"]),
                                       rtol=0, atol=1e-6)
            self.assertEqual(mine["label"].tolist(), want["label"].tolist())
        self.assertEqual(len(fake.main.waited), len(self.batches))
        self.assertEqual(len(set(map(id, fake.main.waited))), len(self.batches))
        # Two shapes (images, labels), each a ring of prefetch + 1 buffers at most;
        # with 4 batches and prefetch 1 the buffers are reused (and waited for).
        self.assertLessEqual(len(fake.buffers), 2 * (prefetch + 1))
        if prefetch + 1 < len(self.batches):
            self.assertGreater(fake.reuses, 0)
        self.assertEqual(fake.errors, [])
        loader.loader.close()

    def test_given_cuda_then_copies_come_from_page_locked_buffers_on_a_side_stream(self):
        self.check_cuda_path(thread=False, prefetch=1)

    def test_given_cuda_and_a_background_thread_then_the_same_order_of_events(self):
        self.check_cuda_path(thread=True, prefetch=1)

    def test_given_cuda_and_a_deep_prefetch_then_the_ring_holds_every_batch_ahead(self):
        self.check_cuda_path(thread=True, prefetch=3)

    def test_given_a_device_loader_then_it_refuses_what_it_cannot_do(self):
        from goldminer.torch import DeviceLoader
        with self.assertRaises(ValueError) as caught:
            DeviceLoader(device="cpu", prefetch=0)
        self.assertIn("prefetch must be at least 1", str(caught.exception))
        with self.assertRaises(ValueError) as caught:
            DeviceLoader(device="cpu", loader=goldminer.Loader(coordinator=self.coordinator.address))
        self.assertIn("tail=False", str(caught.exception))


class TailTest(unittest.TestCase):
    def test_given_stages_in_either_order_then_the_values_agree(self):
        from goldminer._tail import Tail
        image = np.arange(2 * 5 * 3 * 3, dtype=np.uint8).reshape(2, 5, 3, 3) * 3
        a = Tail(TAIL).numpy(image, "HWC")
        b = Tail(list(reversed(TAIL))).numpy(image, "HWC")  # to_tensor first: x/255, then 1/std
        np.testing.assert_allclose(a, reference_tail(image), rtol=0, atol=1e-6)
        np.testing.assert_allclose(b, a, rtol=0, atol=1e-5)
        hwc = Tail([{"op": "to_tensor", "layout": "HWC", "dtype": "float32"}]).numpy(image, "HWC")
        np.testing.assert_array_equal(hwc, image.astype(np.float32) / np.float32(255))

    def test_given_a_stage_it_cannot_apply_then_the_error_names_it(self):
        from goldminer._tail import Tail, TailError
        for stages, why in [([{"op": "flip", "p": 0.5}], 'op "flip" cannot run'),
                            ([{"op": "normalize", "mean": [0, 0], "std": [1, 1, 1]}], "3 numbers"),
                            ([{"op": "to_tensor", "layout": "CWH"}], 'layout must be'),
                            ([{"kind": "x"}], 'with an "op"'),
                            ({"op": "normalize"}, "must be a list")]:
            with self.assertRaises(TailError) as caught:
                Tail(stages)
            self.assertIn(why, str(caught.exception))
        twice = Tail([TAIL[0], TAIL[0]])
        with self.assertRaises(TailError) as caught:
            twice.numpy(np.zeros((1, 2, 2, 3), np.uint8), "HWC")
        self.assertIn("already normalized", str(caught.exception))


if __name__ == "__main__":
    unittest.main()
