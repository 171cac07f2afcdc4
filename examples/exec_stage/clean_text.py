"""An exec stage written in Python: tidy a review before native tokenization.

goldminer runs it as
    /usr/bin/python3 -m goldminer.stage clean_text:clean
in long-lived child processes; each call gets one sample dict and returns it.
"""

import html
import re

_TAG = re.compile(r"<[^>]+>")
_SPACE = re.compile(r"\s+")


def clean(sample):
    text = sample["data"].decode("utf-8", "replace")
    text = html.unescape(_TAG.sub(" ", text))
    text = _SPACE.sub(" ", text).strip()
    sample["data"] = text.encode("utf-8")
    sample["fields"]["chars"] = str(len(text)).encode()
    return sample
