"""Read Karpenter v0.x's `karpenter-global-settings` ConfigMap at start, when it exists, and
reload the options with its settings under the environment and flags (which win).

It lives in the namespace Karpenter ran in: SYSTEM_NAMESPACE, as Karpenter's chart set it, or
`karpenter`. A missing ConfigMap (or no right to read it) leaves the options as they are.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence

from karpy.kube.client import KubeClient
from karpy.kube.errors import KubeError, NotFoundError
from karpy.kube.kinds import CONFIGMAPS
from karpy.runtime.globalsettings import GLOBAL_SETTINGS_NAME, environ_with_global_settings
from karpy.runtime.options import Options, load

log = logging.getLogger(__name__)


async def with_global_settings(argv: Sequence[str], options: Options) -> Options:
    """`options`, reloaded over the ConfigMap's settings when the ConfigMap exists.

    Raises KubeConfigError for an unusable kubeconfig and OptionsError for a ConfigMap value
    karpy cannot use (the message names the variable it maps to).
    """
    namespace = os.environ.get("SYSTEM_NAMESPACE", "karpenter")
    client = await KubeClient.connect(
        options.kube.kubeconfig, request_timeout=options.kube.request_timeout
    )
    try:
        configmap = await client.get(CONFIGMAPS, GLOBAL_SETTINGS_NAME, namespace=namespace)
    except NotFoundError:
        return options
    except KubeError as error:
        log.warning(
            "cannot read karpenter-global-settings",
            extra={"namespace": namespace, "error": str(error)},
        )
        return options
    finally:
        await client.close()
    environ, ignored = environ_with_global_settings(configmap.data, os.environ)
    for key in ignored:
        log.warning(
            "karpenter-global-settings key has no karpy setting; ignoring it",
            extra={"namespace": namespace, "key": key},
        )
    log.info("read karpenter-global-settings", extra={"namespace": namespace})
    return load(argv, environ)
