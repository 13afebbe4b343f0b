"""The model servers a model can run on, chosen by its `runtime` key."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from components.runtimes.mlserver import MLServerModel

ModelSpec = Annotated[MLServerModel, Field(discriminator="runtime")]
"""One model's spec; the `runtime` key selects the runtime's own settings model."""

RUNTIMES = ("mlserver",)
