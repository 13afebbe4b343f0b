"""Entry point of both the Pulumi program and the `python -m infra` command-line tool.

`pulumi up` runs this directory as a script (Pulumi.yaml has `main: infra/`), and so does the
offline render, under the SDK's mocks. `python -m infra` imports it as the module infra.__main__.
"""

import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent

if __spec__ is not None and __spec__.name == "infra.__main__":
    from infra.cli import main

    sys.exit(main())
else:
    # Run as a directory, Python puts infra/ itself first on sys.path; the project root is what
    # must be importable (infra, components, stacks are packages there).
    if sys.path and Path(sys.path[0]).resolve() == _HERE:
        sys.path[0] = str(_HERE.parent)
    elif str(_HERE.parent) not in sys.path:
        sys.path.insert(0, str(_HERE.parent))

    from infra.program import run

    run()
