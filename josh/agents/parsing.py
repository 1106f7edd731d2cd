"""The protocols' shared readers at their old path, for protocols outside josh: ``josh.core.parsing``."""

from josh.core.parsing import Parsed, ReadCall, malformed, read_call

__all__ = ["Parsed", "ReadCall", "malformed", "read_call"]
