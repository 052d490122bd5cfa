"""What the Hugging Face interoperability tests share (test_hf_interop.py,
test_gpt2_hf.py): transformers offline and quiet, torch on one thread, the
1e-5 relative tolerance, and check(), which prints each result and keeps
the failures. Import it before transformers: the offline switches must be
set first."""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
import torch  # noqa: E402
from transformers.utils import logging as hf_logging  # noqa: E402

hf_logging.set_verbosity_error()
torch.set_num_threads(1)
TOL = 1e-5
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)
