"""josh: self-training tool-calling dialogue agents from sparse rewards."""

from josh.util import deferred_compile

__version__ = "0.1.0"

deferred_compile.install()  # bitsandbytes' import no longer imports torch's inductor (see the module)
