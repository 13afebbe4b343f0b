"""Parse an Envoy typed config with Envoy's own API messages; runs in .venv-envoy, not the test venv.

Reads {"type_url": ..., "value": {...}} as JSON on stdin and prints {"ok": true} or the parser's
error. It imports nothing of this project.
"""

import json
import sys

from envoy.extensions.filters.http.local_ratelimit.v3 import local_rate_limit_pb2
from google.protobuf import json_format

MESSAGES = {
    f"type.googleapis.com/{message.DESCRIPTOR.full_name}": message for message in (local_rate_limit_pb2.LocalRateLimit,)
}


def main() -> None:
    request = json.load(sys.stdin)
    message = MESSAGES[request["type_url"]]()
    try:
        json_format.ParseDict(request["value"], message)
    except json_format.ParseError as error:
        print(json.dumps({"error": str(error)}))
        return
    print(json.dumps({"ok": True, "text": str(message)}))


if __name__ == "__main__":
    main()
