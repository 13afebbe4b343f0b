"""The Pulumi program of this repository: a thin entry point over the inference_platform library
(Pulumi.yaml's `main`), and `python -m infra`, the old spelling of its command-line tools."""
