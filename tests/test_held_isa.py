"""The held-ISA engine run of .ci/run holds what it names: ATen's own kernels run at the capability
``ATEN_CPU_CAPABILITY`` asks for (a misspelt or unsupported value would leave them at the processor's
best, and the run would test nothing new). Without the variable there is nothing to check. The
evidence that each variable changes results is tools/held_isa.py (docs/testing.md, "Exact or close")."""
import os

import torch


def test_aten_runs_at_the_capability_the_environment_holds():
    held = os.environ.get("ATEN_CPU_CAPABILITY")
    if held:
        assert torch.backends.cpu.get_cpu_capability() == held.upper()
