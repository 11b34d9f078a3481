"""Graph capture: the torch.cuda.graphs names that other code checks.

No provider captures graphs yet (``torch_infini.diagnostics()`` reports
``capabilities.graphs = False``), so nothing is ever being captured.
"""

from __future__ import annotations


def is_current_stream_capturing() -> bool:
    r"""Return True if infini graph capture is underway on the current infini stream, False otherwise.

    Always False: no infini provider supports graph capture yet. Code that
    skips work during capture (synchronizations, host reads) runs it.
    """
    return False
