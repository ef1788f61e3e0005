"""``torch_threads(n)``: run a block with n torch CPU threads, restoring the caller's count afterwards.

Small sequential torch work (gradient matching, LSTM and parser steps) runs several times faster on one thread
than on two threads competing for a shared 2-core machine; runners use this instead of changing the setting for
good.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

__all__ = ["torch_threads"]


@contextlib.contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """Run the block with torch on ``n`` threads, restoring the previous count afterwards."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)
