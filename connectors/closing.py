"""``with client:``: the context-manager protocol of every connector that holds connections."""

from __future__ import annotations

from typing import Self


class CloseOnExit:
    """Mixin: ``with obj:`` gives ``obj`` and calls ``obj.close()`` on the way out, whether the
    block raised or not (the exception, if any, propagates)."""

    def close(self) -> None:
        """Release what the object holds; subclasses define it (idempotently)."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
