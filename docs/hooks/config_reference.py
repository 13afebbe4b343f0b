"""MkDocs hook: the committed stack config reference must be what the config models generate.

docs/config-reference.md is committed so that it reads on GitHub too; this hook regenerates it
from the models during `mkdocs build` and fails the build when the committed page differs
(`make docs-reference` rewrites it).
"""

from __future__ import annotations

from typing import Any

from mkdocs.exceptions import PluginError

from inference_platform.cli.config_reference import PAGE, reference_markdown

SOURCE = PAGE.removeprefix("docs/")


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    if page.file.src_uri != SOURCE:
        return markdown
    generated = reference_markdown()
    if markdown != generated:
        raise PluginError(f"{PAGE} is stale: the config models describe other settings; run `make docs-reference`")
    return generated
