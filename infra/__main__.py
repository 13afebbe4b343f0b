"""Entry point of both the Pulumi program and the `python -m infra` command-line tool.

`pulumi up` runs this directory as a script (Pulumi.yaml has `main: infra/`), and so does the
offline render, under the SDK's mocks: the program is the library's stack, composed from the
stack's config. `python -m infra` imports it as the module infra.__main__: the old spelling of
`python -m inference_platform` (the `inference-platform` command), kept working.
"""

import sys

if __spec__ is not None and __spec__.name == "infra.__main__":
    from inference_platform.cli.main import main

    sys.exit(main())
else:
    from inference_platform.cli.environment import read_project_stack
    from inference_platform.stack.program import run

    run(read_project_stack)
