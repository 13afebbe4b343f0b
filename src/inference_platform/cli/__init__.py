"""The command-line tools (`inference-platform`, or `python -m infra`): render a stack offline,
diff renders, promote versions, analyze canaries and shadows, plan GPU capacity."""
