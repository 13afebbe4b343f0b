"""Which stack files a platform stack's render read, so that a shard renders on a current one only.

A platform stack's render writes `stack-files.yaml` into its directory: the program's version and
a digest of each stack file it read (its own and each shard's). A shard rendered on that render
(`--platform-render`, or the render directory's sibling) compares the record with the files as they
are now, beside the shard's, and refuses a render whose files changed since, each changed file
named (`--allow-stale-platform` makes that a warning); the shard's own file is left out, since the
shard reads its own file itself. The shard writes the record it rendered on into its own render
as `platform-render.yaml`.

What "changed" means: a file's digest is of its config as the program reads it (cli/stack_file.py),
so a comment or a re-indented line is no change, and a value is. The offline render reads no
secure value's ciphertext (a placeholder stands for each), so re-encrypting a secret is no change
either. A file's modification time is not looked at.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inference_platform import __version__
from inference_platform.cli.names import ALLOW_STALE_PLATFORM
from inference_platform.cli.stack_file import read_stack_file
from inference_platform.config.errors import Problem
from inference_platform.stack import fleet
from inference_platform.stack.config import decode_value, project_values

STACK_FILES = "stack-files.yaml"
"""In a platform stack's render: the record of the stack files it read."""
PLATFORM_RENDER = "platform-render.yaml"
"""In a shard's render: the record of the platform render it rendered on (that render's stack-files.yaml)."""


@dataclass(frozen=True)
class Record:
    """A platform render's stack files: by stack name, the digest of its file (None: it had none)."""

    platform: str
    program: str
    digests: Mapping[str, str | None]

    def as_json(self) -> dict[str, Any]:
        return {"platform": self.platform, "program": self.program, "stackFiles": dict(sorted(self.digests.items()))}

    @classmethod
    def from_json(cls, document: Any) -> Record | None:
        """The record a render holds; None for a document of another shape."""
        if not isinstance(document, Mapping):
            return None
        platform, program, digests = (document.get(key) for key in ("platform", "program", "stackFiles"))
        if not (isinstance(platform, str) and isinstance(program, str) and isinstance(digests, Mapping)):
            return None
        if not all(isinstance(value, str | None) for value in digests.values()):
            return None
        return cls(platform, program, {str(stack): value for stack, value in digests.items()})


def file_digest(path: Path) -> str | None:
    """The sha256 of a stack file's config as the program reads it (None: no such file)."""
    if not path.is_file():
        return None
    stack_file = read_stack_file(path)
    content = {"config": stack_file.config, "secretKeys": sorted(stack_file.secret_keys)}
    return hashlib.sha256(json.dumps(content, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def record_of(platform: str, path: Path) -> Record:
    """What a render of the platform stack `platform` from its file at `path` reads: that file and
    the files beside it of the shards it lists. Raises ConfigError for a file that is no stack file."""
    names = decode_value(project_values(read_stack_file(path).config).get(fleet.SHARDS_KEY)) if path.is_file() else []
    shards = [name for name in names if isinstance(name, str)] if isinstance(names, list) else []
    digests = {platform: file_digest(path)}
    digests |= {name: file_digest(path.parent / f"Pulumi.{name}.yaml") for name in shards}
    return Record(platform, __version__, digests)


def stale_problems(
    recorded: Record | None, current: Record, shard: str, render: Path, directory: Path
) -> list[Problem]:
    """Why the platform render at `render` (its record: `recorded`, None where it holds none) is not
    what its platform stack's files beside the shard's (in `directory`) render now (`current`):
    each file that changed since, its own problem; none for a current render. The shard's own file
    is not compared: it reads that itself."""
    again = (
        f"render the platform stack again first (infra render --stack {current.platform}), "
        f"or pass {ALLOW_STALE_PLATFORM} to render {shard} on it as it is"
    )
    if recorded is None:
        message = (
            f"holds no {STACK_FILES}, the record of the stack files a platform stack's render read "
            f"(a render by an older inference-platform): {again}"
        )
        return [Problem("", message, position=str(render))]
    if recorded.program != current.program:
        message = f"is a render by inference-platform {recorded.program}, and this is {current.program}: {again}"
        return [Problem("", message, position=str(render / STACK_FILES))]
    changed = [
        stack for stack, digest in current.digests.items() if stack != shard and recorded.digests.get(stack) != digest
    ]
    return [
        Problem(
            "",
            _changed(render, current.digests[stack] is None, again),
            position=str(directory / f"Pulumi.{stack}.yaml"),
        )
        for stack in changed
    ]


def _changed(render: Path, gone: bool, again: str) -> str:
    """A stack file's problem: gone, or changed, since the platform render read it."""
    since = f"since the platform render {render} read it"
    if gone:
        return f"is gone {since} ({render / STACK_FILES} records it): {again}"
    return f"changed {since} ({render / STACK_FILES} holds another digest of it): {again}"
