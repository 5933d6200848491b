"""The one-launch selection (indexer_logits._topk_resident, path "resident") on what is its own: the
four kernels' phases in one kernel, run as four launches under the interpreter where a row has
several programs (its barrier cannot wait there: programs run one after another) and as one launch
where a row has one program (the barrier then counts the program's own arrivals, as on the GPU);
which shapes it serves (every program resident at once: rows x programs <= SMs), in the table and
in the tuner's space. Exactness is against a stable descending sort (tests/test_topk.py's
assert_same_topk); the generic cases run it through tests/test_topk.py's S.PATHS; the barrier across
programs, eagerly and in a replayed graph, through tests/test_topk_gpu.py."""

import pytest
import torch

from indexer_logits import _api, _topk_select as S, _topk_table as T

from test_topk import assert_same_topk, needs_interpreter
from test_topk_tiles import kernels_run  # noqa: F401 (a fixture)
from tuner import topk_tune


@pytest.fixture(autouse=True)
def _clean_runtime(clean_runtime):
    yield


def _scores(kind, rows, width, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, width, generator=g)
    if kind == "ties":  # runs of equal keys: candidates tied at the k-th score
        x = x.to(torch.bfloat16).float()
    elif kind == "small_ints":  # more candidates than CAP: the exact overflow path
        x = torch.randint(0, 20, (rows, width), generator=g).float()
    elif kind == "outlier":  # a range stretched by one score
        x[:, 17] = 1e30
    elif kind == "all_equal":  # an empty range: every score in bin 0
        x = torch.zeros(rows, width)
    return x


def _run(x, k, lo, hi, settings, values=True):
    rows = x.shape[0]
    ws = S.workspace(rows, x.device)
    idx = torch.full((rows, k), 7, dtype=torch.int32)
    val = torch.full((rows, k), 7.0) if values else None
    served = S.select_rows(x, k, S.WINDOW_RAGGED, idx, val, ws, lo=lo, hi=hi, path="resident", settings=settings)
    assert served == "resident"
    assert int(ws.abs().sum()) == 0, "the last program must leave the workspace (and its barrier word) zero"
    return idx, val


@needs_interpreter
@pytest.mark.parametrize("kind", ["randn", "ties", "small_ints", "outlier", "all_equal"])
@pytest.mark.parametrize("chunk, step, launches", [(1024, 1024, 4), (2048, 1024, 4), (8192, 1024, 1),
                                                   (8192, 8192, 1)])
def test_exact_phase_by_phase_and_in_one_launch(kind, chunk, step, launches, kernels_run):
    """Rows of 3,000-6,000 keys with partial and empty windows, k 512: with chunks of 1,024 or 2,048
    keys a row has several programs (four launches, a phase each); with chunks of 8,192 one (one
    launch, the barrier's waits passed by the program's own arrivals). A chunk of one step is held in
    registers through the phases (HOLD_), a longer one read again a step at a time each phase."""
    rows, width, k = 4, 6000, 512
    x = _scores(kind, rows, width)
    lo = torch.tensor([0, 1000, 0, 3000], dtype=torch.int32)
    hi = torch.tensor([6000, 4500, 300, 3000], dtype=torch.int32)  # (a window under k, an empty one)
    idx, val = _run(x, k, lo, hi, dict(CHUNK=chunk, STEP=step, NUM_WARPS=4))
    assert kernels_run == ["topk_resident_kernel"] * launches
    assert_same_topk(idx, val, x, k, lo, hi)


@needs_interpreter
@pytest.mark.parametrize("scan_slots", [False, True])
def test_slots_by_atomics_or_a_prefix_sum(scan_slots):
    x = _scores("ties", 2, 5000, seed=3)
    lo, hi = torch.zeros(2, dtype=torch.int32), torch.tensor([5000, 4097], dtype=torch.int32)
    for chunk in (2048, 1024):  # (read a step at a time; held)
        idx, val = _run(x, 1024, lo, hi, dict(CHUNK=chunk, STEP=1024, SCAN_SLOTS=scan_slots))
        assert_same_topk(idx, val, x, 1024, lo, hi)


def test_the_model_keeps_every_program_resident():
    """The chunk: the fewest steps that keep rows x programs within the SMs (one program an SM)."""
    assert T.resident_shape(1, 1 << 20, 132, 0, 2048) == 8192  # 128 programs
    assert T.resident_shape(64, 32768, 132, 0, 2048) == 16384  # 2 a row
    assert T.resident_shape(64, 131072, 132, 0, 2048) == 65536
    assert T.resident_shape(128, 8192, 132, 0, 2048) == 8192  # 1 a row
    assert T.resident_shape(132, 100, 132, 0, 2048) == 2048
    assert T.resident_shape(133, 8192, 132, 0, 2048) is None  # a second wave would wait on the first forever
    assert T.resident_shape(64, 32768, 132, 8192, 2048) is None  # 256 programs asked for
    assert T.resident_shape(0, 8192, 132, 0, 2048) is None


def test_a_cuda_device_counts_its_own_sms(monkeypatch):
    """On CUDA the chunk follows the device's SM count, not set_num_sms's (which engines set to size
    DeepGEMM's metadata): the programs must fit the SMs there are."""
    monkeypatch.setattr(_api, "_device_sms", lambda index=None: 132)
    _api.set_num_sms(1000)
    try:
        s = S.path_settings("resident")
        cuda = torch.device("cuda", 0)
        assert S._resident_chunk(1, 1 << 20, s, cuda) == 8192
        assert S._resident_chunk(200, 8192, s, cuda) is None
    finally:
        _api.set_num_sms(None)


def test_a_table_entry_serves_only_shapes_it_fits():
    table = {"entries": [{"rows": 128, "width": 8192, "path": "resident", "settings": {}},
                         {"rows": 128, "width": 8192, "kind": "prefill", "path": "rounds", "settings": {}}]}
    assert T.entry_for(table, 128, 8192, 132, 32768, "decode")["path"] == "resident"
    assert T.entry_for(table, 200, 8192, 132, 32768, "decode") is None  # 200 rows cannot all be resident
    assert T.entry_for(table, 96, 16384, 132, 32768, "decode")["path"] == "resident"


def test_the_table_knows_the_module_step():
    """_topk_table (no triton import) keeps the path's default step for entries that leave it out."""
    from indexer_logits import _topk_resident as R
    assert T.RESIDENT_STEP == R.STEP == S.path_settings("resident")["STEP"]


def test_the_tuner_tries_it_where_it_fits():
    assert topk_tune.space("resident", 1, 1 << 20, 132)
    assert topk_tune.space("resident", 64, 32768, 132)
    assert topk_tune.space("resident", 256, 8192, 132) == []
    for settings in topk_tune.space("resident", 1, 1 << 20, 132):
        S.path_settings("resident", settings)  # every setting is one of the path's
        assert all(v in T.ALLOWED["resident"][n] for n, v in settings.items())


def test_the_gpu_launch_is_one_cooperative_grid(monkeypatch):
    """On a GPU the path is one launch of rows x programs, cooperative (the driver starts it only with
    every program resident, or refuses it), its chunk held in registers where it is one step."""
    from indexer_logits import _topk_paths as P

    class Cuda:  # a CUDA tensor's shape, strides and device, without a GPU
        def __init__(self, *shape):
            self.shape, self.device = shape, torch.device("cuda", 0)

        def stride(self, dim):
            return self.shape[1] if dim == 0 else 1
    monkeypatch.setattr(P, "interpreting", lambda: False)
    monkeypatch.setattr(_api, "_device_sms", lambda index=None: 132)
    for step, held in ((2048, False), (8192, True)):
        seen = []
        s = S.path_settings("resident", dict(STEP=step, NUM_WARPS=16))
        P._launch_resident(lambda fn, grid, *a, **kw: seen.append((fn.fn.__name__, grid, kw)), s, Cuda(1, 1 << 20),
                           2048, S.WINDOW_LIMIT, Cuda(1, 2048), None, None, None, None, None, Cuda(1), 1)
        ((name, grid, kw),) = seen
        assert name == "topk_resident_kernel" and grid == (1, 128) and kw["PHASE_"] == 0 and kw["HOLD_"] is held
        assert kw["launch_cooperative_grid"] is True and kw["num_warps"] == 16 and "launch_pdl" not in kw
