"""How to be a controller in karpy: declare it, and the manager runs it.

A controller class holds its dependencies and domain logic and returns its declaration from
``spec()``: a keyed `Controller` or a one-pass `Singleton`, with the kinds it `Watch`es.
`Manager` gives every declaration the same queue, workers, backoff, spans, metrics, sync wait
and shutdown. docs/architecture.md ("Writing a controller") walks through one.
"""

from karpy.manager.declare import (
    PARALLEL_WORKERS,
    Controller,
    Declaration,
    Extended,
    Gate,
    ProviderExtension,
    RepairedElsewhere,
    Singleton,
    Watch,
    by_name,
    object_controller,
    unless_deleted,
)
from karpy.manager.manager import Loop, Manager
from karpy.runtime.channels import Keys
from karpy.runtime.reconciler import Result

__all__ = [
    "PARALLEL_WORKERS",
    "Controller",
    "Declaration",
    "Extended",
    "Gate",
    "Keys",
    "Loop",
    "Manager",
    "ProviderExtension",
    "RepairedElsewhere",
    "Result",
    "Singleton",
    "Watch",
    "by_name",
    "object_controller",
    "unless_deleted",
]
