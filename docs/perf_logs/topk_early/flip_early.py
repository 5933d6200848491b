"""A pytest plugin (`-p flip_early`, this folder on PYTHONPATH) that runs the GPU tests with the bound path's early loads
(COUNT_EARLY, COMPACT_EARLY) and the row path's held rows (HOLD) on, as defaults would, before they were made so."""


def pytest_configure(config):
    from indexer_logits import _topk_bound as B, _topk_row as R
    B.COUNT_EARLY = B.COMPACT_EARLY = R.HOLD = True
