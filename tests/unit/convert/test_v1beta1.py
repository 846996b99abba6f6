"""Golden tests: `karpy convert` on typical Karpenter v0.32-v0.37 (v1beta1) manifests.

Each case fixes the command line and compares stdout, the warnings and the exit code with files
under tests/data/v1beta1/golden. Regenerate a golden by deleting it and running with
KARPY_UPDATE_GOLDEN=1, then review the diff.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.convert.harness import check_golden, run_convert

DATA = Path(__file__).resolve().parents[2] / "data" / "v1beta1"
GOLDEN = DATA / "golden"

CASES = {
    "100-getting-started": (["100-getting-started.yaml"], []),
    "101-gpu-kubelet": (["101-gpu-kubelet.yaml"], []),
    "102-mixed-versions": (["102-mixed-versions.yaml"], ["--cluster-name", "my-cluster"]),
    "103-refused": (["103-refused.yaml"], []),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_convert_matches_golden(case: str) -> None:
    files, flags = CASES[case]
    check_golden(GOLDEN / f"{case}.yaml", *run_convert(DATA, files, flags))


POOL = """\
apiVersion: karpenter.sh/v1beta1
kind: NodePool
metadata: {name: x}
spec:
  template:
    spec:
      nodeClassRef: {name: default}
      requirements: [{key: karpenter.sh/nodepool, operator: In, values: [a]}]
  disruption: {consolidationPolicy: WhenEmpty}
"""


def test_v1beta1_admission_rules_are_checked_offline() -> None:
    code, _, err = run_convert(DATA, ["-"], [], stdin=POOL)
    assert code == 1
    assert 'spec.template.spec.requirements[0].key: Invalid value: "karpenter.sh/nodepool"' in err
    assert "consolidateAfter must be specified with consolidationPolicy=WhenEmpty" in err


def test_a_kubelet_for_a_class_not_in_the_input_is_refused_naming_it() -> None:
    pool = POOL.replace(
        "requirements: [{key: karpenter.sh/nodepool, operator: In, values: [a]}]",
        "requirements: []\n      kubelet: {maxPods: 20}",
    )
    pool = pool.replace(
        "{consolidationPolicy: WhenEmpty}", "{consolidationPolicy: WhenUnderutilized}"
    )
    code, _, err = run_convert(DATA, ["-"], [], stdin=pool)
    assert code == 1
    assert "spec.template.spec.kubelet: EC2NodeClass 'default'" in err
    assert "is not in the input" in err


def test_the_output_converts_back_to_what_was_written() -> None:
    """v1 -> v1beta1 of the converted getting-started pool gives the input's fields back."""
    import yaml

    from karpy.apis.codec import from_dict, to_dict
    from karpy.apis.v1.nodepool import NodePool
    from karpy.apis.v1beta1.convert import NodeClassDefaults, nodepool_from_v1

    code, out, _ = run_convert(DATA, ["100-getting-started.yaml"], [])
    assert code == 0
    v1 = from_dict(NodePool, next(yaml.safe_load_all(out)))
    defaults = NodeClassDefaults(
        group="karpenter.k8s.aws",
        kind="EC2NodeClass",
        versions={("karpenter.k8s.aws", "EC2NodeClass"): "v1beta1"},
    )
    back = to_dict(nodepool_from_v1(v1, defaults=defaults))
    written = next(yaml.safe_load_all((DATA / "100-getting-started.yaml").read_text()))
    assert back["spec"]["disruption"] == {
        **written["spec"]["disruption"],
        "budgets": [{"nodes": "10%"}],
    }
    assert (
        back["spec"]["template"]["spec"]["nodeClassRef"]
        == written["spec"]["template"]["spec"]["nodeClassRef"]
    )


def test_a_v1beta1_nodeclaim_converts_to_v1() -> None:
    claim = """\
apiVersion: karpenter.sh/v1beta1
kind: NodeClaim
metadata: {name: c}
spec:
  nodeClassRef: {apiVersion: karpenter.k8s.aws/v1beta1, kind: EC2NodeClass, name: default}
  requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [spot]}]
"""
    code, out, err = run_convert(DATA, ["-"], [], stdin=claim)
    assert (code, err) == (0, "")
    assert "apiVersion: karpenter.sh/v1\nkind: NodeClaim\n" in out
    assert "group: karpenter.k8s.aws" in out


def test_a_kubelet_for_a_kwok_class_is_named_as_not_carried() -> None:
    stream = """\
apiVersion: karpenter.sh/v1beta1
kind: NodePool
metadata: {name: x}
spec:
  template:
    spec:
      nodeClassRef: {name: default}
      requirements: []
      kubelet: {maxPods: 20}
---
apiVersion: karpenter.kwok.sh/v1alpha1
kind: KWOKNodeClass
metadata: {name: default}
"""
    code, out, err = run_convert(DATA, ["-"], ["--provider", "kwok"], stdin=stream)
    assert code == 0, err
    assert "spec.template.spec.kubelet: not carried: KWOKNodeClass has no kubelet settings" in err
    assert "kubelet" not in out
