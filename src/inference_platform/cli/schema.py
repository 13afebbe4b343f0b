"""The JSON Schema of a Pulumi.<stack>.yaml for editors (generated from StackConfig)."""

from __future__ import annotations

from typing import Any

from inference_platform.stack.config import PROJECT, StackConfig

SCHEMA_FILE = "infra/stack-config.schema.json"
# Settings meant to be Pulumi secrets: their values may be `{secure: <ciphertext>}` in a stack file.
SECRET_SETTINGS = ("S3Settings", "GcsSettings", "HuggingFaceSettings")
SECURE_VALUE = {
    "type": "object",
    "properties": {"secure": {"type": "string"}},
    "required": ["secure"],
    "additionalProperties": False,
    "description": "A value encrypted by `pulumi config set --secret`.",
}


def stack_file_schema() -> dict[str, Any]:
    config = StackConfig.model_json_schema(by_alias=True, mode="validation")
    definitions = config.pop("$defs", {})
    for name in SECRET_SETTINGS:
        for key, field in definitions[name]["properties"].items():
            definitions[name]["properties"][key] = {"anyOf": [field, {"$ref": "#/$defs/SecureValue"}]}
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
