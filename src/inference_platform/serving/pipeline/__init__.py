"""An inference pipeline: a KServe InferenceGraph over the stack's models, run by KServe's router.
spec.py is what a team writes, manifests.py the objects, component.py the resource."""

from inference_platform.serving.pipeline.component import Pipeline
from inference_platform.serving.pipeline.manifests import PipelineArgs
from inference_platform.serving.pipeline.spec import PipelineSpec

__all__ = ["Pipeline", "PipelineArgs", "PipelineSpec"]
