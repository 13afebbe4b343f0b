"""Reusable Pulumi components of the inference platform. They know nothing of stack config."""
