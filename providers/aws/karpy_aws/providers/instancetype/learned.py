"""Memory learned from registered nodes: what an instance type really gives, once one has run.

EC2 reports an instance type's memory before the hypervisor and the kernel take their share, so
karpy starts from a guess (``VM_MEMORY_OVERHEAD_PERCENT`` off the top, 7.5 % by default). Once a
node of the type has registered, its kubelet reports the real capacity; as Karpenter does, karpy
keeps that figure per instance type and AMI family (the kernel's share depends on the image)
and uses it for that type from then on, so packing is not planned on memory that is not there,
nor left unused because the guess was too cautious. Kept in memory by the leader (a restart
learns again from the registered nodes).
"""

from __future__ import annotations

from karpy_aws.providers.amifamily.amis import AMIFamily


class LearnedMemory:
    """Instance type and AMI family -> memory in bytes a registered node reported. Not
    thread-safe; one event loop owns it."""

    def __init__(self) -> None:
        self._memory: dict[tuple[str, AMIFamily], int] = {}
        self.seq_num = 0
        """Bumped whenever a figure changes; instance types built at an older number are
        stale."""

    def record(self, instance_type: str, family: AMIFamily, memory_bytes: int) -> bool:
        """Keep what a node of ``instance_type`` booted from ``family`` reported; True when
        that changed what karpy knew."""
        key = (instance_type, family)
        if memory_bytes <= 0 or self._memory.get(key) == memory_bytes:
            return False
        self._memory[key] = memory_bytes
        self.seq_num += 1
        return True

    def memory(self, instance_type: str, family: AMIFamily) -> int | None:
        """The learned memory in bytes, or None before a node of the type registered."""
        return self._memory.get((instance_type, family))
