"""The NodeClaim lifecycle controller: launch → registration → initialization, and finalization.

`LifecycleController` is keyed by NodeClaim name; its `spec()` says what wakes it.
"""

from karpy.controllers.nodeclaim.lifecycle.controller import (
    LAUNCH_TIMEOUT,
    REGISTRATION_TIMEOUT,
    LifecycleController,
)

__all__ = ["LAUNCH_TIMEOUT", "REGISTRATION_TIMEOUT", "LifecycleController"]
