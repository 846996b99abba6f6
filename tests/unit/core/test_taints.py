"""Taint and toleration matching, as kube-scheduler does it."""

from __future__ import annotations

import pytest

from karpy.apis.v1 import labels as wk
from karpy.core.taints import (
    Effect,
    Taint,
    Toleration,
    TolerationOperator,
    schedulable_taints,
    untolerated,
)

T = Taint("dedicated", Effect.NO_SCHEDULE, "gpu")


@pytest.mark.parametrize(
    ("toleration", "ok"),
    [
        pytest.param(Toleration("dedicated", value="gpu"), True, id="equal"),
        pytest.param(Toleration("dedicated", value="cpu"), False, id="wrong-value"),
        pytest.param(Toleration("dedicated", TolerationOperator.EXISTS), True, id="exists"),
        pytest.param(Toleration(operator=TolerationOperator.EXISTS), True, id="wildcard"),
        pytest.param(
            Toleration("dedicated", TolerationOperator.EXISTS, effect=Effect.NO_EXECUTE),
            False,
            id="effect",
        ),
        pytest.param(Toleration("other", TolerationOperator.EXISTS), False, id="key"),
    ],
)
def test_toleration_matching(toleration: Toleration, ok: bool) -> None:
    assert toleration.tolerates(T) is ok


def test_untolerated_returns_the_first_uncovered_taint() -> None:
    soft = Taint("soft", Effect.PREFER_NO_SCHEDULE)
    assert untolerated([T, soft], [Toleration("dedicated", value="gpu")]) == soft
    assert untolerated([], []) is None


def test_ephemeral_taints_are_ignored_while_a_node_starts() -> None:
    starting = Taint(wk.TAINT_NODE_NOT_READY, Effect.NO_SCHEDULE)
    assert schedulable_taints([starting, T], initialized=False) == (T,)
    assert schedulable_taints([starting, T], initialized=True) == (starting, T)


def test_describe() -> None:
    assert T.describe() == "dedicated=gpu:NoSchedule"
    assert Taint("k", Effect.NO_EXECUTE).describe() == "k:NoExecute"
