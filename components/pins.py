"""Every container image and Helm chart the platform deploys, pinned in this one place.

Bump a version here and nowhere else; tests refuse `latest` and unpinned references.
"""

from __future__ import annotations

# Model servers.
MLSERVER_IMAGE = "docker.io/seldonio/mlserver:1.7.1"
TFSERVING_IMAGE = "docker.io/tensorflow/serving:2.20.0"
TFSERVING_GPU_IMAGE = "docker.io/tensorflow/serving:2.20.0-gpu"
TORCHSERVE_IMAGE = "docker.io/pytorch/torchserve:0.12.0-cpu"
TORCHSERVE_GPU_IMAGE = "docker.io/pytorch/torchserve:0.12.0-gpu"
# 26.07 ships Triton 2.71, the newest release confirmed published.
TRITON_IMAGE = "nvcr.io/nvidia/tritonserver:26.07-py3"
VLLM_IMAGE = "docker.io/vllm/vllm-openai:v0.33.0"

# Downloads model files from s3://, gs://, http(s):// and hf:// before the server starts.
STORAGE_INITIALIZER_IMAGE = "docker.io/kserve/storage-initializer:v0.20.0"
