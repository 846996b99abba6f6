"""The NodeClaim lifecycle controller: launch → registration → initialization, and finalization.

Register `LifecycleController` with a Runner keyed by NodeClaim name (see its docstring).
"""

from karpy.controllers.nodeclaim.lifecycle.controller import (
    LAUNCH_TIMEOUT,
    REGISTRATION_TIMEOUT,
    LifecycleController,
)

__all__ = ["LAUNCH_TIMEOUT", "REGISTRATION_TIMEOUT", "LifecycleController"]
