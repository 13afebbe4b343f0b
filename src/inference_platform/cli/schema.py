"""The JSON Schema of a Pulumi.<stack>.yaml for editors (generated from StackConfig)."""

from __future__ import annotations

from typing import Any

from inference_platform.config.secrets import secret_fields
from inference_platform.stack.config import PROJECT, StackConfig

SCHEMA_FILE = "infra/stack-config.schema.json"
SECURE_VALUE = {
    "type": "object",
    "properties": {"secure": {"type": "string"}},
    "required": ["secure"],
    "additionalProperties": False,
    "description": "A value encrypted by `pulumi config set --secret`.",
}


SECURE_REF = {"$ref": "#/$defs/SecureValue"}
_ANNOTATIONS = ("title", "description", "default")


def secure_only(generated: dict[str, Any]) -> dict[str, Any]:
    """A secret setting's schema: a `{secure: ...}` value (or null, where the setting may be unset),
    with the generated schema's title, description and default."""
    nullable = {"type": "null"} in generated.get("anyOf", [])
    value: dict[str, Any] = {"anyOf": [SECURE_REF, {"type": "null"}]} if nullable else dict(SECURE_REF)
    return value | {key: generated[key] for key in _ANNOTATIONS if key in generated}


def stack_file_schema() -> dict[str, Any]:
    config = StackConfig.model_json_schema(by_alias=True, mode="validation")
    definitions = config.pop("$defs", {})
    # Settings marked secret (config/secrets.py): their values are `{secure: <ciphertext>}` in a stack
    # file, never plain text (which the render refuses).
    for model, key in sorted(secret_fields(StackConfig), key=lambda field: (field[0].__name__, field[1])):
        properties = definitions[model.__name__]["properties"]
        properties[key] = secure_only(properties[key])
    definitions["SecureValue"] = SECURE_VALUE
    properties = {f"{PROJECT}:{key}": value for key, value in config["properties"].items()}
    required = [f"{PROJECT}:{key}" for key in config.get("required", [])]
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"Pulumi stack file of {PROJECT}",
        "description": "Validates Pulumi.<stack>.yaml; other projects' keys (kubernetes:context, ...) pass.",
        "type": "object",
        "properties": {
            "config": {
                "type": "object",
                "properties": properties,
                "required": required,
                "patternProperties": {f"^(?!{PROJECT}:)[^:]+:.+$": {}},
                "additionalProperties": False,
            },
            "secretsprovider": {"type": "string"},
            "encryptedkey": {"type": "string"},
            "encryptionsalt": {"type": "string"},
        },
        "$defs": definitions,
    }
