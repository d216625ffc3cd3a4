"""Test configuration: without a GPU, run the Triton kernels in Triton's CPU interpreter.

TRITON_INTERPRET must be set before triton is first imported (torchvision imports it),
so this happens here, before any test module is collected. With CUDA the same tests run
the compiled kernels on the GPU.
"""
import atexit
import os
import shutil
import tempfile
import zlib

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
# One default tile per kernel variant; tests that cover tuning and every tile say so. Tiles
# they tune go to a file of the test run's own, never read from or written to the user's.
os.environ.setdefault("IMGFILTERS_AUTOTUNE", "0")
if "IMGFILTERS_CACHE_DIR" not in os.environ:
    os.environ["IMGFILTERS_CACHE_DIR"] = tempfile.mkdtemp(prefix="imgfilters-test-cache-")
    atexit.register(shutil.rmtree, os.environ["IMGFILTERS_CACHE_DIR"], True)
# pytest-xdist workers share the machine's cores: each takes its share for torch (and so the
# CPU engine and the float64 reference) and inductor compiles in the worker itself. By
# default every worker would use every core and inductor would start a pool of that many
# compile processes in each: 16 workers on 16 cores ran 256 compile processes at once.
WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if WORKERS > 1:
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // WORKERS))

import pytest  # noqa: E402

# Triton decides at decoration time whether a kernel runs in the interpreter, and the
# package imports its kernels lazily: import them all now, under the setting above (a
# test that drops TRITON_INTERPRET for the float64 path would otherwise leave compiled
# kernels behind for the tests after it).
import imgfilters.ops  # noqa: E402,F401

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


# The suite's timed steps (cold first calls, helpers.cold_first_call) measure compile time,
# which 15 other workers compiling at once would stretch. So on a GPU every test holds a
# shared lock while it runs, and a timed step takes it exclusively: it waits until no test
# runs, which under pytest-xdist is when the other workers have run out of tests (a shared
# lock never waits for a waiting exclusive one), so the timed steps run last, one at a time.
LOCKS = "IMGFILTERS_TEST_LOCKS"


def pytest_configure(config):
    if torch.cuda.is_available() and LOCKS not in os.environ:  # (the controller: its workers inherit it)
        import tempfile
        os.environ[LOCKS] = tempfile.mkdtemp(prefix="imgfilters-test-locks-")


def pytest_collection_modifyitems(config, items):
    """The timed steps last in the run (the sort keeps every other order): a worker whose
    timed step waits for the exclusive lock runs nothing else until then, so a timed step
    handed out early would idle its worker for most of the suite."""
    items.sort(key=lambda item: item.get_closest_marker("timed") is not None)


@pytest.fixture(autouse=True)
def one_timed_step_at_a_time(request):
    """Hold the suite's shared lock while the test runs (on a GPU; the tests marked
    ``timed`` take it exclusively in their subprocess instead)."""
    if not torch.cuda.is_available() or request.node.get_closest_marker("timed"):
        yield
        return
    import fcntl
    with open(os.path.join(os.environ[LOCKS], "tests"), "a") as tests:
        fcntl.flock(tests, fcntl.LOCK_SH)
        yield


@pytest.fixture
def device():
    """Where kernels run: the GPU, or the interpreter on CPU tensors."""
    return DEVICE


# Random inputs come from a fixed base (set IMGFILTERS_TEST_SEED to draw others) plus a hash
# of the test's name: every run draws the same inputs, and each test its own.
SEED_BASE = int(os.environ.get("IMGFILTERS_TEST_SEED", "17"))


@pytest.fixture
def gen(request):
    """A generator seeded for this test (printed with the base: a failure is reproducible)."""
    seed = SEED_BASE + zlib.crc32(request.node.nodeid.encode())
    print(f"generator seed {seed} (IMGFILTERS_TEST_SEED={SEED_BASE})")
    return torch.Generator().manual_seed(seed)


@pytest.fixture
def cpu_engine():
    """CPU tensors (not float64) run the compiled CPU engine (``imgfilters/cpu``) in this
    test, also under ``TRITON_INTERPRET=1`` (where they otherwise run the interpreted
    kernels); the engine's tests take it."""
    pytest.importorskip("numba")
    from imgfilters import _image
    with _image.cpu_engine(True):
        yield


@pytest.fixture
def one_torch_thread():
    """torch (and so the CPU engine) on one thread, unless a test sets its own: the float64
    reference's loops of thousands of small operations spend most of their time waking a
    second thread (a minute against a second on two busy cores)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
