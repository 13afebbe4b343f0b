"""Names the command line's help text shows (environment variables, the program's files), kept in
a module that imports nothing heavy: `--help` answers without loading pulumi, pydantic or rich,
which each command imports when it runs (cli/main.py)."""

from __future__ import annotations

from inference_platform.cli.project import PROJECT_FILE

CHARTS_DIR_ENV = "INFRA_CHARTS_DIR"
"""Where the render expands charts from (pinned tarballs), as --charts-dir does."""
MANIFESTS_DIR_ENV = "INFRA_MANIFESTS_DIR"
"""Where the render reads pinned manifest files from, as --manifests-dir does."""
NO_CHARTS_ENV = "INFRA_NO_CHARTS"
"""When set, the render expands no charts (as --no-charts), unless --charts-dir is given."""
PROGRAM_DIRECTORIES = ("src", "infra", "policies")
"""Directories whose files every stack runs: the library, the program, the policy pack."""
PROGRAM_FILES = (PROJECT_FILE, "pyproject.toml", "requirements*.txt")
"""Files at the root (patterns) that every stack runs with: the project, the package, its pins."""
ALLOW_STALE_PLATFORM = "--allow-stale-platform"
"""The render's flag that renders a shard on a platform render whose stack files changed since."""
