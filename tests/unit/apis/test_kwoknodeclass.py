"""KWOKNodeClass.spec.nodeRegistrationDelay decodes and reads back as a timedelta."""

from __future__ import annotations

from datetime import timedelta

import pytest

from karpy.apis.codec import to_dict
from karpy.apis.registry import decode_object
from karpy_kwok.apis.kwoknodeclass import KWOKNodeClass, KWOKNodeClassSpec


def test_an_unset_delay_registers_at_once_and_is_not_written() -> None:
    cls = decode_object(
        {"apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": "KWOKNodeClass", "metadata": {}}
    )
    assert isinstance(cls, KWOKNodeClass)
    assert cls.spec.registration_delay() == timedelta(0)
    assert "spec" not in to_dict(cls)


def test_a_set_delay_round_trips() -> None:
    cls = KWOKNodeClass(spec=KWOKNodeClassSpec(node_registration_delay="1m30s"))
    assert cls.spec.registration_delay() == timedelta(seconds=90)
    assert to_dict(cls)["spec"] == {"nodeRegistrationDelay": "1m30s"}
    assert decode_object(to_dict(cls)) == cls


def test_a_bad_delay_names_the_field() -> None:
    with pytest.raises(ValueError, match=r"spec\.nodeRegistrationDelay"):
        KWOKNodeClassSpec(node_registration_delay="soon").registration_delay()
