"""Hypothesis strategies for hostile Karpenter objects: NodePools and NodeClaims (v1 and
v1beta1), v1alpha5 Provisioners and EC2NodeClasses, whose fields are sometimes right, sometimes
nearly right and sometimes nonsense.

Each strategy builds the object's JSON as a user (or a careless script) would send it to the
apiserver: known keys with values drawn from the valid ones, their near misses and junk, plus
now and then a key the schema does not know. Which of them the apiserver admits is the
apiserver's business (the CRDs' schemas and rules); what karpy does with the admitted ones is
what tests/e2e/test_hostile_input.py checks.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from karpy.apis.v1 import labels as wk

LABEL_KEYS = (
    wk.LABEL_INSTANCE_TYPE,
    wk.LABEL_TOPOLOGY_ZONE,
    wk.LABEL_CAPACITY_TYPE,
    wk.LABEL_ARCH,
    wk.LABEL_OS,
    "karpenter.kwok.sh/instance-cpu",
    "example.com/team",
    "kubernetes.io/hostname",
    wk.LABEL_NODEPOOL,
)
OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
BAD_OPERATORS = ("in", "Equals", "")
DURATIONS = ("30s", "0s", "720h", "Never", "1h30m")
BAD_DURATIONS = ("-5m", "forever", "", "10", "5 minutes")
JUNK = st.text(alphabet=st.characters(codec="utf-8"), max_size=12)
"""Any text at all (control characters and emoji included), short."""


def mostly(
    valid: st.SearchStrategy[Any], invalid: st.SearchStrategy[Any]
) -> st.SearchStrategy[Any]:
    """`valid` three times in four: an object has many fields, and one bad field is enough
    for the apiserver to refuse it, so bad values must be rare for some objects to pass."""
    return st.one_of(valid, valid, valid, invalid)


def _duration() -> st.SearchStrategy[str]:
    return mostly(st.sampled_from(DURATIONS), st.sampled_from(BAD_DURATIONS))


def _label_value() -> st.SearchStrategy[str]:
    return mostly(
        st.one_of(
            st.sampled_from(("amd64", "arm64", "linux", "spot", "on-demand", "4", "-3", "zone-a")),
            st.from_regex(r"[a-z0-9]([-a-z0-9.]{0,20}[a-z0-9])?", fullmatch=True),
        ),
        JUNK,
    )


def _requirement() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {
            "key": mostly(st.sampled_from(LABEL_KEYS), JUNK),
            "operator": mostly(st.sampled_from(OPERATORS), st.sampled_from(BAD_OPERATORS)),
        },
        optional={
            "values": st.lists(_label_value(), max_size=3),
            "minValues": mostly(st.integers(1, 3), st.integers(min_value=-2, max_value=60)),
        },
    )


def _taint() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {
            "key": mostly(st.sampled_from(("example.com/dedicated", "a")), JUNK),
            "effect": mostly(
                st.sampled_from(("NoSchedule", "NoExecute", "PreferNoSchedule")), st.just("Never")
            ),
        },
        optional={"value": _label_value()},
    )


def _node_class_ref(kwok_class: str) -> st.SearchStrategy[dict[str, Any]]:
    return mostly(
        st.just({"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": kwok_class}),
        st.fixed_dictionaries(
            {
                "group": st.sampled_from(("karpenter.kwok.sh", "karpenter.k8s.aws", "", "x")),
                "kind": st.sampled_from(("KWOKNodeClass", "EC2NodeClass", "", "Pod")),
                "name": st.one_of(st.just(kwok_class), st.just("missing"), JUNK),
            }
        ),
    )


def _quantity() -> st.SearchStrategy[str | int]:
    return mostly(
        st.one_of(
            st.sampled_from(("10", "1000", "0", "100Gi", "1.5", "1e3")),
            st.integers(min_value=0, max_value=10**6),
        ),
        st.one_of(st.sampled_from(("-1", "lots", "")), st.integers(min_value=-5, max_value=-1)),
    )


def _template_spec(kwok_class: str) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {
            "requirements": st.lists(_requirement(), max_size=3),
            "nodeClassRef": _node_class_ref(kwok_class),
        },
        optional={
            "taints": st.lists(_taint(), max_size=2),
            "startupTaints": st.lists(_taint(), max_size=1),
            "expireAfter": _duration(),
            "terminationGracePeriod": _duration(),
            "unknownField": JUNK,
        },
    )


def _budget() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {
            "nodes": mostly(
                st.sampled_from(("10%", "0", "5", "100%")),
                st.sampled_from(("150%", "-1", "all", "")),
            )
        },
        optional={
            "schedule": mostly(
                st.sampled_from(("@daily", "0 9 * * mon-fri")), st.sampled_from(("* * *", "@never"))
            ),
            "duration": _duration(),
            "reasons": st.lists(
                st.sampled_from(("Drifted", "Empty", "Underutilized", "Expired", "Bored")),
                max_size=3,
            ),
        },
    )


def _template(spec: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    """A NodePool's `template` (v1 and v1beta1 alike): `spec`, and maybe labels."""
    return st.fixed_dictionaries(
        {"spec": spec},
        optional={
            "metadata": st.fixed_dictionaries(
                {},
                optional={
                    "labels": st.dictionaries(
                        st.one_of(st.sampled_from(LABEL_KEYS), JUNK),
                        _label_value(),
                        max_size=3,
                    ),
                },
            )
        },
    )


def nodepools(kwok_class: str) -> st.SearchStrategy[dict[str, Any]]:
    """A v1 NodePool's spec (the caller names it)."""
    return st.fixed_dictionaries(
        {
            "template": _template(_template_spec(kwok_class)),
        },
        optional={
            "disruption": st.fixed_dictionaries(
                {},
                optional={
                    "consolidationPolicy": mostly(
                        st.sampled_from(("WhenEmpty", "WhenEmptyOrUnderutilized")),
                        st.sampled_from(("WhenUnderutilized", "Always")),
                    ),
                    "consolidateAfter": _duration(),
                    "budgets": st.lists(_budget(), max_size=3),
                },
            ),
            "limits": st.dictionaries(
                st.sampled_from(("cpu", "memory", "nodes", "pods", "example.com/gpu", "")),
                _quantity(),
                max_size=3,
            ),
            "weight": st.integers(min_value=-5, max_value=120),
        },
    )


def nodeclaims(kwok_class: str) -> st.SearchStrategy[dict[str, Any]]:
    """A v1 NodeClaim's spec, made by hand (no NodePool owns it)."""
    return st.fixed_dictionaries(
        {
            "requirements": st.lists(_requirement(), max_size=3),
            "nodeClassRef": _node_class_ref(kwok_class),
        },
        optional={
            "resources": st.fixed_dictionaries(
                {},
                optional={
                    "requests": st.dictionaries(
                        st.sampled_from(("cpu", "memory", "pods", "example.com/gpu")),
                        _quantity(),
                        max_size=3,
                    )
                },
            ),
            "taints": st.lists(_taint(), max_size=2),
            "expireAfter": _duration(),
            "terminationGracePeriod": _duration(),
        },
    )


def provisioners() -> st.SearchStrategy[dict[str, Any]]:
    """A karpenter.sh/v1alpha5 Provisioner's spec."""
    return st.fixed_dictionaries(
        {},
        optional={
            "requirements": st.lists(_requirement(), max_size=3),
            "labels": st.dictionaries(st.sampled_from(("team", "a/b", "")), _label_value()),
            "taints": st.lists(_taint(), max_size=2),
            "ttlSecondsAfterEmpty": st.integers(min_value=-5, max_value=10**5),
            "ttlSecondsUntilExpired": st.integers(min_value=-5, max_value=10**7),
            "consolidation": st.fixed_dictionaries({"enabled": st.booleans()}),
            "limits": st.fixed_dictionaries(
                {},
                optional={
                    "resources": st.dictionaries(st.sampled_from(("cpu", "memory")), _quantity())
                },
            ),
            "weight": st.integers(min_value=-5, max_value=120),
            "providerRef": st.fixed_dictionaries({"name": st.sampled_from(("default", "", "x"))}),
        },
    )


def _v1beta1_node_class_ref(kwok_class: str) -> st.SearchStrategy[dict[str, Any]]:
    """v1beta1 names a NodeClass by apiVersion (group/version), kind and name; a kind left out
    means the provider's first NodeClass."""
    return mostly(
        st.fixed_dictionaries(
            {"name": st.just(kwok_class)},
            optional={
                "apiVersion": st.just("karpenter.kwok.sh/v1alpha1"),
                "kind": st.just("KWOKNodeClass"),
            },
        ),
        st.fixed_dictionaries(
            {"name": st.one_of(st.just(kwok_class), st.just("missing"), JUNK)},
            optional={
                "apiVersion": st.sampled_from(
                    ("karpenter.k8s.aws/v1beta1", "karpenter.kwok.sh", "", "v1", "x/y/z")
                ),
                "kind": st.sampled_from(("KWOKNodeClass", "EC2NodeClass", "", "Pod")),
            },
        ),
    )


def _v1beta1_kubelet() -> st.SearchStrategy[dict[str, Any]]:
    """v1beta1's kubelet block, which v1 moved to the NodeClass (refused by name)."""
    return st.fixed_dictionaries(
        {}, optional={"maxPods": st.integers(-1, 300), "podsPerCore": st.integers(0, 10)}
    )


def _v1beta1_template_spec(kwok_class: str) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {
            "requirements": st.lists(_requirement(), max_size=3),
            "nodeClassRef": _v1beta1_node_class_ref(kwok_class),
        },
        optional={
            "taints": st.lists(_taint(), max_size=2),
            "startupTaints": st.lists(_taint(), max_size=1),
            "terminationGracePeriod": _duration(),
            "kubelet": mostly(st.just({}), _v1beta1_kubelet()),
            "unknownField": JUNK,
        },
    )


def v1beta1_nodepools(kwok_class: str) -> st.SearchStrategy[dict[str, Any]]:
    """A karpenter.sh/v1beta1 NodePool's spec: expireAfter sits in its disruption block, and
    WhenUnderutilized is a policy of its own (v1 reads WhenEmptyOrUnderutilized)."""
    return st.fixed_dictionaries(
        {
            "template": _template(_v1beta1_template_spec(kwok_class)),
        },
        optional={
            "disruption": st.fixed_dictionaries(
                {},
                optional={
                    "consolidationPolicy": mostly(
                        st.sampled_from(("WhenEmpty", "WhenUnderutilized")),
                        st.sampled_from(("WhenEmptyOrUnderutilized", "Always")),
                    ),
                    "consolidateAfter": _duration(),
                    "expireAfter": _duration(),
                    "budgets": st.lists(_budget(), max_size=3),
                },
            ),
            "limits": st.dictionaries(
                st.sampled_from(("cpu", "memory", "nodes", "pods", "")),
                _quantity(),
                max_size=3,
            ),
            "weight": st.integers(min_value=-5, max_value=120),
        },
    )


def v1beta1_nodeclaims(kwok_class: str) -> st.SearchStrategy[dict[str, Any]]:
    """A karpenter.sh/v1beta1 NodeClaim's spec, made by hand."""
    return st.fixed_dictionaries(
        {
            "requirements": st.lists(_requirement(), max_size=3),
            "nodeClassRef": _v1beta1_node_class_ref(kwok_class),
        },
        optional={
            "resources": st.fixed_dictionaries(
                {},
                optional={
                    "requests": st.dictionaries(
                        st.sampled_from(("cpu", "memory", "pods")), _quantity(), max_size=3
                    )
                },
            ),
            "taints": st.lists(_taint(), max_size=2),
            "kubelet": mostly(st.just({}), _v1beta1_kubelet()),
            "terminationGracePeriod": _duration(),
        },
    )


def _selector_terms(*keys: str) -> st.SearchStrategy[list[dict[str, Any]]]:
    term = st.fixed_dictionaries(
        {},
        optional={
            "tags": st.dictionaries(
                mostly(st.sampled_from(("karpenter.sh/discovery", "Name", "*")), JUNK),
                mostly(st.sampled_from(("my-cluster", "*", "private-*")), JUNK),
                max_size=2,
            ),
            **{key: mostly(st.sampled_from(_TERM_VALUES[key]), JUNK) for key in keys},
        },
    )
    return mostly(st.lists(term, min_size=1, max_size=3), st.lists(term, max_size=31))


_TERM_VALUES: dict[str, tuple[str, ...]] = {
    "id": ("subnet-0123456789abcdef0", "sg-0123456789abcdef0", "ami-0123456789abcdef0", "x"),
    "alias": ("al2023@latest", "bottlerocket@v1.20.0", "al2@latest", "windows2022@latest"),
    "name": ("my-ami-*", "default"),
    "owner": ("amazon", "self", "123456789012"),
    "ssmParameter": ("/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard",),
}


def ec2nodeclasses() -> st.SearchStrategy[dict[str, Any]]:
    """A karpenter.k8s.aws/v1 EC2NodeClass's spec."""
    return st.fixed_dictionaries(
        {
            "subnetSelectorTerms": _selector_terms("id"),
            "securityGroupSelectorTerms": _selector_terms("id", "name"),
            "amiSelectorTerms": _selector_terms("alias", "id", "name", "owner", "ssmParameter"),
        },
        optional={
            "role": mostly(st.sampled_from(("KarpenterNodeRole-my-cluster",)), JUNK),
            "instanceProfile": mostly(st.sampled_from(("KarpenterNodeInstanceProfile",)), JUNK),
            "amiFamily": mostly(
                st.sampled_from(("AL2023", "AL2", "Bottlerocket", "Custom")),
                st.sampled_from(("Windows2022", "Ubuntu", "")),
            ),
            "tags": st.dictionaries(
                mostly(
                    st.sampled_from(("team", "kubernetes.io/cluster/x", "karpenter.sh/nodepool")),
                    JUNK,
                ),
                _label_value(),
                max_size=3,
            ),
            "metadataOptions": st.fixed_dictionaries(
                {},
                optional={
                    "httpEndpoint": mostly(st.sampled_from(("enabled", "disabled")), JUNK),
                    "httpTokens": mostly(st.sampled_from(("required", "optional")), JUNK),
                    "httpPutResponseHopLimit": st.integers(-1, 70),
                },
            ),
            "blockDeviceMappings": st.lists(
                st.fixed_dictionaries(
                    {"deviceName": mostly(st.sampled_from(("/dev/xvda", "/dev/xvdb")), JUNK)},
                    optional={
                        "rootVolume": st.booleans(),
                        "ebs": st.fixed_dictionaries(
                            {},
                            optional={
                                "volumeSize": _quantity(),
                                "volumeType": mostly(st.sampled_from(("gp3", "io2")), JUNK),
                                "iops": st.integers(-1, 70000),
                            },
                        ),
                    },
                ),
                max_size=2,
            ),
            "userData": JUNK,
            "detailedMonitoring": st.booleans(),
            "associatePublicIPAddress": st.booleans(),
            "instanceStorePolicy": mostly(st.just("RAID0"), JUNK),
            "unknownField": JUNK,
        },
    )
