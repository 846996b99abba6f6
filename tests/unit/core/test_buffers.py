"""CapacityBuffers in the pure core: how a buffer is sized, and its virtual pods solved behind
real pending pods (real pods take free room first; virtual pods get room, new if need be)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from karpy.core.buffers import (
    MAX_REPLICAS,
    BufferSizeError,
    buffer_replicas,
    held_room,
    limit_replicas,
    percentage_replicas,
    solve_with_buffers,
)
from karpy.core.resources import Resources
from karpy.core.snapshot import ClusterSnapshot
from tests.unit.core import builders as b

CHUNK = Resources.of({"cpu": "500m", "memory": "1Gi", "pods": 1})
counts = st.integers(min_value=0, max_value=10_000)
maybe = st.none() | counts


def test_replicas_alone_size_the_buffer() -> None:
    size = buffer_replicas(
        replicas=3, percentage=None, workload_replicas=None, limits=None, chunk=CHUNK
    )
    assert size == 3


def test_percentage_rounds_up_and_holds_at_least_one_chunk() -> None:
    assert percentage_replicas(20, 10) == 2
    assert percentage_replicas(15, 10) == 2  # 1.5 rounds up
    assert percentage_replicas(1, 3) == 1  # at least one while the workload runs
    assert percentage_replicas(50, 0) == 0
    assert percentage_replicas(0, 10) == 0


def test_replicas_and_percentage_take_the_larger_and_limits_cap_it() -> None:
    size = buffer_replicas(
        replicas=2, percentage=50, workload_replicas=10, limits=None, chunk=CHUNK
    )
    assert size == 5
    capped = buffer_replicas(
        replicas=2,
        percentage=50,
        workload_replicas=10,
        limits={"cpu": 1_500},  # three chunks of 500m
        chunk=CHUNK,
    )
    assert capped == 3


def test_limits_alone_hold_as_many_chunks_as_fit() -> None:
    limits = {"cpu": 4_000, "memory": 3 * 1024**3 * 1000}
    size = buffer_replicas(
        replicas=None, percentage=None, workload_replicas=None, limits=limits, chunk=CHUNK
    )
    assert size == 3  # memory allows three, cpu eight


def test_limits_on_resources_the_chunk_does_not_request_are_refused_by_field() -> None:
    with pytest.raises(BufferSizeError, match=r"spec\.limits: .*nvidia\.com/gpu"):
        limit_replicas({"nvidia.com/gpu": 4_000}, CHUNK)


def test_nothing_to_size_the_buffer_is_refused() -> None:
    with pytest.raises(BufferSizeError, match=r"spec\.replicas"):
        buffer_replicas(
            replicas=None, percentage=10, workload_replicas=None, limits=None, chunk=CHUNK
        )


@given(
    replicas=maybe,
    percentage=st.none() | st.integers(min_value=0, max_value=500),
    workload=maybe,
    cpu_limit=st.none() | st.integers(min_value=0, max_value=10**9),
)
def test_size_is_the_larger_wish_within_the_limits(
    replicas: int | None, percentage: int | None, workload: int | None, cpu_limit: int | None
) -> None:
    limits = None if cpu_limit is None else {"cpu": cpu_limit}
    wishes = [r for r in (replicas,) if r is not None]
    if percentage is not None and workload is not None:
        wishes.append(percentage_replicas(percentage, workload))
    if not wishes and limits is None:
        with pytest.raises(BufferSizeError):
            buffer_replicas(
                replicas=replicas,
                percentage=percentage,
                workload_replicas=workload,
                limits=limits,
                chunk=CHUNK,
            )
        return
    size = buffer_replicas(
        replicas=replicas,
        percentage=percentage,
        workload_replicas=workload,
        limits=limits,
        chunk=CHUNK,
    )
    assert 0 <= size <= MAX_REPLICAS
    if wishes:
        assert size <= max(wishes)
    if cpu_limit is not None:
        # The chunks' summed requests fit the limit, and one more would not.
        assert size * CHUNK["cpu"] <= cpu_limit
        if size < (max(wishes) if wishes else MAX_REPLICAS):
            assert (size + 1) * CHUNK["cpu"] > cpu_limit
    else:
        assert size == max(wishes)


def _one_node_snapshot(free_cpu: str = "2") -> ClusterSnapshot:
    return b.snapshot(
        [b.nodepool()], types=[b.instance_type("it-4", 4, 16)], nodes=[b.node("n1", cpu=free_cpu)]
    )


def test_virtual_pods_without_room_get_a_new_nodeclaim() -> None:
    virtual = b.pods(3, "buffer", cpu="1")
    results = solve_with_buffers(
        b.snapshot([b.nodepool()], types=[b.instance_type("it-4", 4, 16)]), [], virtual
    )
    assert len(results.nodeclaims) == 1
    assert sorted(results.nodeclaims[0].pods) == sorted(p.uid for p in virtual)


def test_a_real_pod_takes_the_free_room_before_the_buffer() -> None:
    # n1 has room for one 1.5-cpu pod; a buffer chunk wants it too.
    real = b.pod("real", cpu="1500m")
    virtual = b.pods(1, "buffer", cpu="1500m")
    results = solve_with_buffers(_one_node_snapshot(), [real], virtual)
    placed = results.placed()
    assert placed[real.uid] == "n1"
    assert placed[virtual[0].uid] != "n1"  # the buffer's room is launched again
    assert len(results.nodeclaims) == 1


def test_held_room_names_the_node_each_virtual_pod_sits_on() -> None:
    virtual = b.pods(2, "buffer", cpu="1500m")  # n1 holds one; no new nodes are planned
    where = held_room(_one_node_snapshot(), [], virtual)
    assert list(where.values()) == ["n1"]
    # A real pending pod takes the room first: then no virtual pod sits there.
    assert held_room(_one_node_snapshot(), [b.pod("real", cpu="1500m")], virtual) == {}


@given(
    real_cpu=st.lists(st.integers(min_value=1, max_value=4), max_size=4),
    virtual_count=st.integers(min_value=0, max_value=4),
)
def test_every_real_pod_that_fits_free_room_alone_is_placed_there(
    real_cpu: list[int], virtual_count: int
) -> None:
    snap = _one_node_snapshot(free_cpu="4")
    real = [b.pod(f"r{i}", cpu=f"{c * 500}m") for i, c in enumerate(real_cpu)]
    virtual = b.pods(virtual_count, "buffer", cpu="500m")
    alone = {n.pod for n in b.run(snap, real).nominations}
    together = solve_with_buffers(snap, real, virtual)
    placed = together.placed()
    assert alone <= {n.pod for n in together.nominations}
    # Nothing is lost: every pod, real or virtual, is placed or explained.
    explained = {e.uid for e in together.unplaced}
    assert {p.uid for p in (*real, *virtual)} == set(placed) | explained
