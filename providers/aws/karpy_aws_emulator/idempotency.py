"""CreateFleet's ClientToken, honoured as EC2 honours it (moto ignores it).

EC2 makes a request idempotent by its client token: repeating CreateFleet with a token it has
seen returns the first call's answer (the same fleet and instances) and launches nothing; the
same token with different parameters is refused with ``IdempotentParameterMismatch``. karpy's
AWS provider sends a token derived from the NodeClaim's UID, so a launch retried after a crash
cannot make a second instance; moto would make one, so the emulator would hide exactly the bug
the token prevents. ``install()`` wraps moto's CreateFleet handler with that rule (once per
process; moto's state is per process too). Tokens are kept for the server's lifetime (EC2 keeps
them for at least a day, longer than any test or demo).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

MISMATCH_CODE = "IdempotentParameterMismatch"
_installed = threading.Event()


def install() -> None:
    """Make moto's CreateFleet honour ClientToken. Imports moto; call once it may be imported."""
    if _installed.is_set():
        return
    from moto.ec2.exceptions import EC2ClientError
    from moto.ec2.responses.fleets import Fleets

    original: Callable[[Any], Any] = Fleets.create_fleet
    lock = threading.Lock()
    seen: dict[tuple[str, str, str], tuple[tuple[tuple[str, str], ...], Any]] = {}

    @functools.wraps(original)
    def create_fleet(self: Any) -> Any:
        token = self._get_param("ClientToken")
        if not token:
            return original(self)
        key = (str(self.current_account), str(self.region), str(token))
        fingerprint = tuple(
            sorted((k, repr(v)) for k, v in self.querystring.items() if k != "ClientToken")
        )
        with lock:
            known = seen.get(key)
            if known is not None:
                if known[0] != fingerprint:
                    raise EC2ClientError(
                        MISMATCH_CODE,
                        f"The client token {token} was used with different parameters.",
                    )
                return known[1]
            result = original(self)
            seen[key] = (fingerprint, result)
            return result

    Fleets.create_fleet = create_fleet  # type: ignore[method-assign]
    _installed.set()
