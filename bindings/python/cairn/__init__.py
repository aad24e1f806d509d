"""cairn: durable session state for coding agents, over libcairn's C ABI.

    import cairn

    with cairn.connect("/path/to/workspace") as c:        # daemon mode
        c.save("s1", change={"append_messages": [{"role": "user", "content": "hi"}]})
        state = c.resume_session("s1")

``cairn.connect(..., embedded=True)`` runs the engine in this process instead
(it takes the workspace's store lock). ``cairn.aio`` is the asyncio flavour.
Errors are :class:`CairnError` subclasses carrying ``code`` and ``message``.

libcairn is found through ``CAIRN_LIBRARY``, next to this package, or in a
``build/`` directory above it. The fork rule: the Go runtime inside libcairn
does not survive ``fork()`` without ``exec()``; a client used in a forked
child raises :class:`ForkedError`.
"""

from . import errors as _errors
from .client import Client, Step, StepLike, Subscription, connect, open_handles, version
from .errors import *  # noqa: F401,F403 -- every name in errors.__all__

__version__ = "0.1.0"

__all__ = [
    "Client",
    "Step",
    "StepLike",
    "Subscription",
    "connect",
    "open_handles",
    "version",
    *_errors.__all__,
]
