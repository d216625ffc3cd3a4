"""Test configuration: without a GPU, run the Triton kernels in Triton's CPU interpreter.

TRITON_INTERPRET must be set before triton is first imported (torchvision imports it),
so this happens here, before any test module is collected. With CUDA the same tests run
the compiled kernels on the GPU.
"""
import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
# One default tile per kernel variant; tests that cover tuning and every tile say so.
os.environ.setdefault("IMGFILTERS_AUTOTUNE", "0")

import pytest  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@pytest.fixture
def device():
    """Where kernels run: the GPU, or the interpreter on CPU tensors."""
    return DEVICE


@pytest.fixture
def gen():
    """A freshly seeded generator per test: random inputs, reproducible failures."""
    seed = int.from_bytes(os.urandom(4), "little")
    print(f"generator seed {seed}")
    return torch.Generator().manual_seed(seed)
