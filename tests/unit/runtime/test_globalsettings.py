"""karpenter-global-settings keys become karpy's options, under the environment and flags."""

from __future__ import annotations

from karpy.runtime.globalsettings import environ_with_global_settings
from karpy.runtime.options import load

DATA = {
    "aws.clusterName": "from-configmap",
    "aws.defaultInstanceProfile": "KarpenterNodeInstanceProfile",
    "batchIdleDuration": "2s",
    "batchMaxDuration": "20s",
    "aws.vmMemoryOverheadPercent": "0.08",
    "aws.enablePodENI": "true",
}


def test_configmap_settings_become_options_and_unknown_keys_are_named() -> None:
    environ, ignored = environ_with_global_settings(DATA, {"KARPY_PROVIDER": "aws"})
    options = load([], environ)
    assert options.provider.cluster_name == "from-configmap"
    assert options.provider.default_instance_profile == "KarpenterNodeInstanceProfile"
    assert options.provider.settings == {"vm-memory-overhead-percent": "0.08"}
    assert options.batching.idle_duration == 2.0
    assert options.batching.max_duration == 20.0
    assert ignored == ["aws.enablePodENI"]


def test_environment_and_flags_win_over_the_configmap() -> None:
    environ, _ = environ_with_global_settings(
        DATA, {"CLUSTER_NAME": "from-env", "KARPY_PROVIDER": "aws"}
    )
    assert load([], environ).provider.cluster_name == "from-env"
    flagged = load(["--cluster-name", "from-flag", "--batch-idle-duration", "1s"], environ)
    assert flagged.provider.cluster_name == "from-flag"
    assert flagged.batching.idle_duration == 1.0
