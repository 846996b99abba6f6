"""Identities and kubeconfigs of the local control plane.

Two identities are minted per cluster: ``admin`` (in ``system:masters``, bound to cluster-admin;
used by the control-plane components, the tests and the demo) and ``karpy`` (no groups beyond
``system:authenticated``), so the RBAC karpy ships in deploy/ is exercised as a user's cluster
would exercise it. Static bearer tokens keep this free of certificate tooling; the service-account
signing key comes from ``openssl``.
"""

from __future__ import annotations

import secrets
import shutil
import subprocess
from pathlib import Path

import attrs
import yaml

from karpy.localcluster.errors import LocalClusterError


@attrs.frozen
class Identity:
    """A static-token user of the local apiserver."""

    user: str
    token: str
    groups: tuple[str, ...]


def mint_identities() -> tuple[Identity, Identity]:
    """Fresh random tokens for the admin and karpy identities."""
    admin = Identity(user="admin", token=secrets.token_hex(24), groups=("system:masters",))
    karpy = Identity(user="karpy", token=secrets.token_hex(24), groups=())
    return admin, karpy


def write_token_file(path: Path, identities: tuple[Identity, ...]) -> None:
    """kube-apiserver's --token-auth-file: token,user,uid,"group1,group2"."""
    rows = [f'{who.token},{who.user},uid-{who.user},"{",".join(who.groups)}"' for who in identities]
    path.write_text("\n".join(rows) + "\n")
    path.chmod(0o600)


def write_service_account_keys(directory: Path) -> tuple[Path, Path]:
    """An RSA key pair for signing service-account tokens: (private, public)."""
    openssl = shutil.which("openssl")
    if openssl is None:
        raise LocalClusterError(
            "'openssl' is not on PATH; it generates the service-account signing key "
            "(Debian: apt-get install openssl)"
        )
    private = directory / "sa.key"
    public = directory / "sa.pub"
    for command in (
        [openssl, "genrsa", "-out", str(private), "2048"],
        [openssl, "rsa", "-in", str(private), "-pubout", "-out", str(public)],
    ):
        result = subprocess.run(command, capture_output=True, text=True, check=False, timeout=60)
        if result.returncode != 0:
            raise LocalClusterError(
                f"generating the service-account key failed: {' '.join(command)}: "
                f"{result.stderr.strip()}"
            )
    private.chmod(0o600)
    return private, public


def write_kubeconfig(
    path: Path, *, cluster: str, server: str, ca_file: Path, identity: Identity
) -> None:
    """A kubeconfig with one cluster, one user and one current context."""
    context = f"{identity.user}@{cluster}"
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": cluster,
                "cluster": {"server": server, "certificate-authority": str(ca_file)},
            }
        ],
        "users": [{"name": identity.user, "user": {"token": identity.token}}],
        "contexts": [{"name": context, "context": {"cluster": cluster, "user": identity.user}}],
        "current-context": context,
        "preferences": {},
    }
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    path.chmod(0o600)
