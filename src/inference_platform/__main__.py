"""`python -m inference_platform`: the command-line tools (render, diff, promote, analyze, capacity, schema)."""

import sys

from inference_platform.cli.main import main

sys.exit(main())
