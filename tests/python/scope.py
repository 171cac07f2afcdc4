"""How much of a suite runs on this torch.

Every test runs on the pinned torch 2.x (python2.* in ctest). On the legacy torch
(Debian's 1.13: python.*, GOLDMINER_TEST_SCOPE=legacy) test_offload's
WorkersTransportTest, which repeats OffloadTest's programs over the data
workers, runs only the tests it adds: OffloadTest's run once, in-process, on 1.13,
so the torch-specific paths are covered on both and CI does not pay twice for
what the torch does not change.
"""
import os
import unittest


def legacy():
    return os.environ.get("GOLDMINER_TEST_SCOPE") == "legacy"


def own_tests_only_on_legacy(tests, *classes):
    """load_tests' body: `tests` less, on the legacy torch, the tests that each
    of `classes` inherits rather than defines."""
    if not legacy():
        return tests
    kept = unittest.TestSuite()

    def walk(suite):
        for t in suite:
            if isinstance(t, unittest.TestSuite):
                walk(t)
                continue
            name = t.id().rsplit(".", 1)[-1]
            inherited = any(type(t) is c and name not in vars(c) for c in classes)
            if not inherited:
                kept.addTest(t)
    walk(tests)
    return kept
