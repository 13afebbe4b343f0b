"""`python -m inference_platform.provider` prints the package schema the provider serves (what
`make provider` writes to plugin/schema.json)."""

import json

from inference_platform.provider.host import schema

print(json.dumps(schema(), indent=2, sort_keys=True))
