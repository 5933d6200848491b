"""What can change a timing: the GPU, its compute capability, driver and library versions.

Queried on demand (never at import) so that importing the tuner never touches a GPU.
"""

from __future__ import annotations

import platform
from dataclasses import asdict, dataclass

from indexer_logits._identity import slugify


@dataclass(frozen=True)
class Environment:
    gpu_name: str  # "no GPU" on a CPU machine
    gpu_slug: str  # directory name under indexer_logits/tables/, e.g. "nvidia_h200"
    compute_capability: str  # "9.0", or "" without a GPU
    sm_count: int
    driver: str
    cuda: str
    torch: str
    triton: str
    python: str

    def to_dict(self) -> dict:
        return asdict(self)


def _driver_version() -> str:
    try:
        import pynvml  # optional (nvidia-ml-py)

        pynvml.nvmlInit()
        v = pynvml.nvmlSystemGetDriverVersion()
        return v.decode() if isinstance(v, bytes) else str(v)
    except Exception:
        pass
    try:
        import subprocess

        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else ""
    except Exception:
        return ""


def current(device: int | None = None) -> Environment:
    import torch
    import triton

    if torch.cuda.is_available():
        dev = torch.cuda.current_device() if device is None else device
        props = torch.cuda.get_device_properties(dev)
        name = props.name
        cc = f"{props.major}.{props.minor}"
        sms = props.multi_processor_count
        driver = _driver_version()
        cuda = torch.version.cuda or ""
    else:
        name, cc, sms, driver, cuda = "no GPU", "", 0, "", torch.version.cuda or ""
    return Environment(name, slugify(name) if cc else "cpu", cc, sms, driver, cuda, torch.__version__,
                       triton.__version__, platform.python_version())
