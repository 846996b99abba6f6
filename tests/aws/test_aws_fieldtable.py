"""docs/providers/aws.md's EC2NodeClass field table is the one the model gives, and the model
cannot leave a field out of it or call a refused field built."""

from __future__ import annotations

import attrs
import pytest

from karpy_aws.apis import fieldtable
from karpy_aws.apis.ec2nodeclass import EC2NodeClassSpec

pytestmark = pytest.mark.aws


def test_the_committed_table_is_current() -> None:
    text = fieldtable.DOC.read_text()
    assert fieldtable.rendered(text) == text, "run python -m karpy_aws.apis.fieldtable"


def test_every_field_has_a_row_in_spec_order() -> None:
    fields = [r[0] for r in fieldtable.rows()]
    assert len(fields) == len(attrs.fields(EC2NodeClassSpec))
    assert fields[0] == "subnetSelectorTerms"
    assert "capacityReservationSelectorTerms" in fields


def test_a_field_without_an_entry_or_a_refused_one_shows(monkeypatch: pytest.MonkeyPatch) -> None:
    missing = {k: v for k, v in fieldtable.EFFECTS.items() if k != "context"}
    monkeypatch.setattr(fieldtable, "EFFECTS", missing)
    with pytest.raises(KeyError, match="'context'"):
        fieldtable.rows()
    monkeypatch.setattr(fieldtable, "EFFECTS", {**missing, "context": "x", "nope": "y"})
    with pytest.raises(ValueError, match="nope"):
        fieldtable.rows()
    monkeypatch.undo()
    monkeypatch.setattr(fieldtable, "NOT_YET_SUPPORTED", {"context": "CreateFleet contexts"})
    monkeypatch.setattr(
        "karpy_aws.apis.ec2nodeclass.NOT_YET_SUPPORTED", {"context": "CreateFleet contexts"}
    )
    refused = {r[0]: r[1:] for r in fieldtable.rows()}["context"]
    assert refused[0] == "refused"
    assert "karpy does not support CreateFleet contexts yet; remove context" in refused[1]
