"""The repository's stack files point to the page that holds what their comments leave out."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_dev_stack_points_to_the_page_with_the_kind_port_mapping() -> None:
    """Pulumi.dev.yaml's URLs work with the gateway's node port mapped to the host: the page it
    names must be the one with kind's extraPortMappings (docs/kind.md), not the README."""
    comment = " ".join(line for line in (ROOT / "Pulumi.dev.yaml").read_text().splitlines() if line.startswith("#"))
    match = re.search(r"node port mapped to the host \(see ([^)]+)\)", comment)
    assert match, "Pulumi.dev.yaml no longer says where the port mapping is"
    page = ROOT / match[1]
    assert page.is_file(), f"{match[1]} does not exist"
    assert "extraPortMappings" in page.read_text()
