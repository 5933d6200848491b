"""Test set-up: kernels run under Triton's interpreter when there is no GPU.

TRITON_INTERPRET must be set before any kernel module is imported (triton.jit reads it), and
interpreted and compiled kernels cannot share a process, so the choice is made once, here.
GPU tests carry the `gpu` marker and are skipped without CUDA.
"""

import os

import pytest
import torch

HAS_CUDA = torch.cuda.is_available()
if not HAS_CUDA:
    os.environ.setdefault("TRITON_INTERPRET", "1")
INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"


# Under pytest-xdist (README's test command: -n auto) each worker's torch takes its share of the cores, so
# workers do not each start a thread per core.
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    from tuner.tune import cpu_count

    torch.set_num_threads(max(1, cpu_count() // int(os.environ["PYTEST_XDIST_WORKER_COUNT"])))


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook: .ci/triton_matrix.sh's venvs run without it
def pytest_xdist_auto_num_workers(config):
    """-n auto: one worker on a GPU host (its tests time kernels and size memory on the one GPU, which
    workers side by side would disturb); on the CPU a worker a core, at most 8 (each holds torch and
    Triton's interpreter, ~0.5 GiB)."""
    if HAS_CUDA and not INTERPRET:
        return 1
    from tuner.tune import cpu_count

    return min(8, cpu_count())


def pytest_collection_modifyitems(config, items):
    if HAS_CUDA and not INTERPRET:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (and TRITON_INTERPRET unset)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def device() -> str:
    """Where kernel tests put their tensors: the GPU when compiled, the CPU under the interpreter."""
    return "cpu" if INTERPRET else "cuda"


@pytest.fixture(scope="module")
def kernel_dir(tmp_path_factory, request):
    """A folder for the kernel modules one test module emits (shared by its tests)."""
    return tmp_path_factory.mktemp(request.module.__name__.rsplit(".", 1)[-1] + "_kernels")


@pytest.fixture
def dot_dtype_for():
    """The tl.dot operand dtype a test may use: the interpreter gets bf16 dots wrong, so CPU
    tests use fp16 (exact for fp8 inputs) or fp32 (exact for bf16 inputs)."""

    def pick(cache_dtype: str) -> str:
        if not INTERPRET:
            return "native"
        return "fp16" if cache_dtype == "fp8" else "fp32"

    return pick


@pytest.fixture
def clean_runtime(monkeypatch):
    """No runtime environment overrides, and the runtime's caches emptied before and after."""
    import indexer_logits as K
    from indexer_logits import _dispatch

    for name in (_dispatch.ENV_BACKEND, _dispatch.ENV_TABLE_DIR, "INDEXER_LOGITS_CHECK_VALUES"):
        monkeypatch.delenv(name, raising=False)
    K.clear_cache()
    yield
    K.clear_cache()
