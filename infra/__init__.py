"""The entry point, the stack config schema and the command-line tool of inference-platform."""
