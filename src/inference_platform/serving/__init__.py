"""Serving models on the platform: the InferenceService (one model, its versions and routes), the
Pipeline (an inference graph over models), the namespace they run in, and what they are made of:
runtimes, GPUs, model storage, access, protection, autoscaling; and the comparator of shadows' answers."""

from inference_platform.serving.inference_service import InferenceService, InferenceServiceArgs
from inference_platform.serving.model_namespace import ModelNamespace, ModelNamespaceArgs
from inference_platform.serving.payload_comparator import PayloadComparator, PayloadComparatorArgs
from inference_platform.serving.pipeline import Pipeline, PipelineArgs, PipelineSpec
from inference_platform.serving.runtimes import ModelSpec

__all__ = [
    "InferenceService",
    "InferenceServiceArgs",
    "ModelNamespace",
    "ModelNamespaceArgs",
    "ModelSpec",
    "PayloadComparator",
    "PayloadComparatorArgs",
    "Pipeline",
    "PipelineArgs",
    "PipelineSpec",
]
