"""LoRA adapters: small weight deltas a version's engine serves beside its base model, each under a
name of its own that clients put in the OpenAI `model` field.

A version lists its adapters (`adapters: [{name, uri}]`); each is fetched the way the version's
model is (model_storage.py: a pvc:// adapter mounted read-only, any other downloaded by the storage
initializer with the same credentials and way out) into its own directory, /mnt/adapters/<name>,
which the engine loads at start. Only runtimes whose engine serves LoRA adapters
(`ModelSpecBase.SUPPORTS_LORA`) accept them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from pydantic import AfterValidator, Field
from pydantic_core import PydanticCustomError

from inference_platform.config.base import DNS1123_LABEL_RULE, ConfigModel, Quantity, SchemaRule, check_dns1123_label
from inference_platform.serving.model_storage import ExtraFiles, ModelUri

ADAPTER_DIR = "/mnt/adapters"
"""Where the engine reads each adapter's files: <ADAPTER_DIR>/<name>."""
VOLUME_PREFIX = "adapter-"
"""An adapter's volume, and its download's init container, are named adapter-<name>."""
MAX_NAME_LENGTH = 63 - len(VOLUME_PREFIX)


def check_adapter_name(value: str) -> str:
    """A DNS label short enough to name the adapter's volume: safe in the OpenAI `model` field, in
    a command line's name=path pair, and in a Kubernetes name."""
    try:
        check_dns1123_label(value)
    except PydanticCustomError:
        valid = False
    else:
        valid = len(value) <= MAX_NAME_LENGTH
    if not valid:
        raise PydanticCustomError(
            "adapter_name",
            "'{value}' is not a valid adapter name: use at most {most} lowercase letters, digits and '-', "
            "starting and ending with a letter or digit (it names the adapter's volume, adapter-<name>)",
            {"value": value, "most": MAX_NAME_LENGTH},
        )
    return value


AdapterName = Annotated[
    str, AfterValidator(check_adapter_name), SchemaRule(**DNS1123_LABEL_RULE.keywords | {"maxLength": MAX_NAME_LENGTH})
]


class LoraAdapter(ConfigModel):
    """A LoRA adapter the version's engine serves beside the base model, under its own name."""

    name: AdapterName = Field(
        description="What clients ask for in the OpenAI `model` field (SGLang: <model>:<name>); a DNS label of at "
        "most 55 characters, unique in the version, and neither the model's name nor a version's."
    )
    uri: ModelUri = Field(
        description="Where its files are (adapter_config.json and the weights): pvc://<claim>/<path> (mounted), or "
        "s3://, gs://, http(s)://, hf:// (downloaded before the server starts, with the model's credentials)."
    )
    download_size: Quantity = Field(
        default="2Gi",
        description="Size of the volume a downloaded adapter goes to; its download requests that much ephemeral "
        "storage on top of what the pod's earlier downloads took. Unused for pvc://.",
    )

    @property
    def path(self) -> str:
        """Where the engine reads the adapter's files."""
        return f"{ADAPTER_DIR}/{self.name}"

    @property
    def files(self) -> ExtraFiles:
        """How the pod gets its files: fetched as the model's are, into its own volume at `path`."""
        return ExtraFiles(
            name=VOLUME_PREFIX + self.name, uri=self.uri, path=self.path, download_size=str(self.download_size)
        )


@dataclass(frozen=True)
class LoraLimits:
    """What a model's adapters take in each of its pods that serves them (for the capacity plan)."""

    adapters: int
    """The most adapters any version lists."""
    batch: int
    """Adapters one batch serves at once (`maxLoras`)."""
    slots: int
    """Adapter slots the engine reserves in GPU memory, each for one adapter of rank up to `max_rank`:
    `batch`, and for an engine that keeps the base model in a slot of its own (SGLang), one more."""
    max_rank: int | None
    """`maxLoraRank`; None leaves it to the engine (vLLM: its default; SGLang: the adapters' largest)."""
