"""Unit tests of goldminer._frame, goldminer.stage and goldminer.dataset_stage.

Run: /usr/bin/python3 -m unittest discover -s tests/python
"""

import errno
import os
import struct
import subprocess
import sys
import tempfile
import unittest

import numpy as np

PYTHON_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python")
sys.path.insert(0, os.path.normpath(PYTHON_DIR))

from goldminer import _frame, dataset_stage, stage  # noqa: E402


def make_sample(**overrides):
    sample = {"index": 7, "label": 3, "key": "shard-0#img7", "data": b"\x00\xffbytes",
              "ext": "jpg", "fields": {"cls": b"3", "json": b"{}"},
              "tensor": np.arange(24, dtype=np.float32).reshape(2, 3, 4), "layout": "hwc"}
    sample.update(overrides)
    return sample


def handle_quietly(fn):
    """stage.handle(fn) on make_sample()'s body, its traceback kept off stderr."""
    body = _frame.encode_sample(make_sample())[8:]
    with open(os.devnull, "w") as devnull:
        saved, sys.stderr = sys.stderr, devnull
        try:
            return stage.handle(fn, bytearray(body))
        finally:
            sys.stderr = saved


class FrameRoundTripTest(unittest.TestCase):
    def test_given_a_sample_with_tensor_when_encoded_and_decoded_then_all_fields_survive(self):
        sample = make_sample()
        out = _frame.decode_frame(_frame.encode_sample(sample))
        for k in ("index", "label", "key", "data", "ext", "fields", "layout"):
            self.assertEqual(out[k], sample[k], k)
        np.testing.assert_array_equal(out["tensor"], sample["tensor"])
        self.assertEqual(out["tensor"].dtype, np.float32)

    def test_given_no_tensor_when_roundtripped_then_tensor_is_none(self):
        out = _frame.decode_frame(_frame.encode_sample(make_sample(tensor=None)))
        self.assertIsNone(out["tensor"])
        self.assertEqual(out["layout"], "none")

    def test_given_known_sample_when_encoded_then_bytes_match_the_documented_layout(self):
        frame = _frame.encode_sample({"index": 1, "label": -1, "key": "k", "data": b"ab",
                                      "ext": "", "fields": {},
                                      "tensor": np.array([5], dtype=np.int32)})
        body = (struct.pack("<Qq", 1, -1) + struct.pack("<I", 1) + b"k" +
                struct.pack("<I", 2) + b"ab" + struct.pack("<I", 0) + struct.pack("<I", 0) +
                bytes([1, 1, 0, 1]) + struct.pack("<q", 1) + struct.pack("<Q", 4) +
                struct.pack("<i", 5))
        self.assertEqual(frame, b"GMS1" + struct.pack("<I", len(body)) + body)

    def test_given_other_dtypes_when_encoded_then_they_widen_to_wire_dtypes(self):
        cases = [(np.bool_, np.uint8), (np.int16, np.int32), (np.uint16, np.int32),
                 (np.uint32, np.int64), (np.float64, np.float32), (np.int64, np.int64)]
        for src, wire in cases:
            out = _frame.decode_frame(_frame.encode_sample(
                make_sample(tensor=np.ones((2,), dtype=src))))
            self.assertEqual(out["tensor"].dtype, np.dtype(wire), src)

    def test_given_decoded_tensor_when_modified_in_place_then_it_is_writable(self):
        out = _frame.decode_frame(_frame.encode_sample(make_sample()))
        out["tensor"][0, 0, 0] = 42.0
        self.assertEqual(out["tensor"][0, 0, 0], 42.0)

    def test_given_error_frame_when_decoded_then_it_raises_with_the_message(self):
        with self.assertRaisesRegex(_frame.FrameError, "bad row"):
            _frame.decode_frame(_frame.encode_error("bad row"))


class MalformedFrameTest(unittest.TestCase):
    def test_given_short_header_then_error(self):
        with self.assertRaisesRegex(_frame.FrameError, "need 8"):
            _frame.decode_frame(b"GMS1")

    def test_given_bad_magic_then_error(self):
        with self.assertRaisesRegex(_frame.FrameError, "bad magic"):
            _frame.decode_frame(b"XXXX" + struct.pack("<I", 0))

    def test_given_oversize_length_then_error(self):
        with self.assertRaisesRegex(_frame.FrameError, "1 GiB"):
            _frame.decode_header(b"GMS1" + struct.pack("<I", (1 << 30) + 1))

    def test_given_truncated_body_then_error_names_the_field(self):
        frame = _frame.encode_sample(make_sample())
        body = bytearray(frame[8:30])
        with self.assertRaisesRegex(_frame.FrameError, "key"):
            _frame.decode_body(body)

    def test_given_nbytes_not_matching_dims_then_error(self):
        frame = bytearray(_frame.encode_sample(make_sample(tensor=np.zeros(3, np.int32))))
        # The last 12 bytes are data; the 8 before them are nbytes (12): claim 16.
        frame[-20:-12] = struct.pack("<Q", 16)
        with self.assertRaisesRegex(_frame.FrameError, "cannot hold 16 bytes"):
            _frame.decode_body(frame[8:])


class StageFunctionTest(unittest.TestCase):
    def test_given_function_returning_array_when_handled_then_tensor_is_replaced(self):
        def fn(sample):
            return np.frombuffer(sample["data"][::-1], dtype=np.uint8).astype(np.float32)

        body = _frame.encode_sample(make_sample(tensor=None, data=b"\x01\x02"))[8:]
        out = _frame.decode_frame(stage.handle(fn, bytearray(body)))
        np.testing.assert_array_equal(out["tensor"], np.array([2, 1], np.float32))
        self.assertEqual(out["key"], "shard-0#img7")

    def test_given_function_that_raises_when_handled_then_error_frame_has_last_line(self):
        def fn(sample):
            raise ValueError("row 7 is broken")

        frame = handle_quietly(fn)
        with self.assertRaisesRegex(_frame.FrameError, "ValueError: row 7 is broken"):
            _frame.decode_frame(frame)

    def test_given_a_function_short_of_memory_or_descriptors_then_a_resource_error_frame(self):
        cases = [(MemoryError(), _frame.RESOURCE_MAGIC),
                 (OSError(errno.EMFILE, "Too many open files"), _frame.RESOURCE_MAGIC),
                 (OSError(errno.ENOSPC, "No space left on device"), _frame.RESOURCE_MAGIC),
                 (OSError(errno.ENOENT, "No such file"), _frame.ERROR_MAGIC),
                 (ValueError("bad row"), _frame.ERROR_MAGIC)]
        for exc, magic in cases:
            def fn(sample, exc=exc):
                raise exc

            frame = handle_quietly(fn)
            self.assertEqual(frame[:4], magic, repr(exc))
            with self.assertRaises(_frame.FrameError):
                _frame.decode_frame(frame)

    def test_given_served_module_when_frames_are_piped_then_each_gets_a_response(self):
        with tempfile.TemporaryDirectory() as tmp:
            with open(os.path.join(tmp, "upper.py"), "w") as f:
                f.write("def fn(s):\n    print('noise')\n    s['data'] = s['data'].upper()\n"
                        "    return s\n")
            request = b"".join(_frame.encode_sample(make_sample(data=d, tensor=None))
                               for d in (b"ab", b"cd"))
            env = dict(os.environ, PYTHONPATH=os.path.normpath(PYTHON_DIR))
            proc = subprocess.run([sys.executable, "-m", "goldminer.stage", "upper:fn"],
                                  input=request, capture_output=True, cwd=tmp, env=env,
                                  timeout=60, check=True)
        out, datas = proc.stdout, []
        while out:
            _, length = _frame.decode_header(out)
            datas.append(_frame.decode_frame(out[:8 + length])["data"])
            out = out[8 + length:]
        self.assertEqual(datas, [b"AB", b"CD"])
        self.assertIn(b"noise", proc.stderr)


class SeededStageTest(unittest.TestCase):
    def seeded(self, seed, sample):
        frame = _frame.encode_sample(sample)
        body = struct.pack("<Q", seed) + frame[8:]
        return _frame.SEEDED_MAGIC + struct.pack("<I", len(body)) + body

    def test_given_a_seeded_request_when_split_then_the_seed_and_the_sample_come_apart(self):
        frame = self.seeded(2**64 - 1, make_sample(data=b"xyz", tensor=None))
        magic, length = _frame.decode_header(frame)
        self.assertEqual(magic, _frame.SEEDED_MAGIC)
        seed, body = _frame.split_seed(magic, bytearray(frame[8:8 + length]))
        self.assertEqual(seed, 2**64 - 1)
        self.assertEqual(_frame.decode_body(body)["data"], b"xyz")
        self.assertEqual(_frame.decode_frame(frame)["data"], b"xyz")

    def test_given_the_same_seed_then_random_numpy_and_torch_draw_the_same(self):
        import random
        import torch  # noqa: F401  (imported: the stage seeds it too)

        def draw(sample):
            self.assertIsNotNone(stage.sample_seed())
            return np.array([random.random(), np.random.rand(), torch.rand(1).item()],
                            dtype=np.float32)

        def run(seed):
            body = self.seeded(seed, make_sample(tensor=None))[8:]
            seed_read, sample_body = _frame.split_seed(_frame.SEEDED_MAGIC, bytearray(body))
            return _frame.decode_frame(stage.handle(draw, sample_body, seed_read))["tensor"]

        a, b, c = run(7), run(7), run(8)
        np.testing.assert_array_equal(a, b)
        self.assertFalse(np.array_equal(a, c))
        self.assertEqual(len(set(a.tolist())), 3)  # three generators, three draws


class DatasetStageTest(unittest.TestCase):
    def test_given_tuple_items_when_served_then_tensor_and_label_are_set(self):
        fn = dataset_stage.make_handler([(np.full((2, 2), i, np.float64), i * 10)
                                         for i in range(3)])
        out = fn({"index": 2, "label": -1})
        self.assertEqual(out["label"], 20)
        np.testing.assert_array_equal(out["tensor"], np.full((2, 2), 2.0))

    def test_given_pil_image_when_converted_then_hwc_uint8(self):
        from PIL import Image
        a, layout = dataset_stage.to_array(Image.new("L", (4, 3), 9))
        self.assertEqual((a.shape, a.dtype, layout), ((3, 4, 1), np.uint8, "hwc"))
        a, layout = dataset_stage.to_array(Image.new("RGBA", (4, 3)))
        self.assertEqual(a.shape, (3, 4, 3))


if __name__ == "__main__":
    unittest.main()
