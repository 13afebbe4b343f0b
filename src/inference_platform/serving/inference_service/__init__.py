"""One model served on the platform: see component.py for the resource, manifests.py for its objects
(args.py names them, pods.py runs them, routing.py routes to them)."""

from inference_platform.serving.inference_service.args import InferenceServiceArgs
from inference_platform.serving.inference_service.component import InferenceService

__all__ = ["InferenceService", "InferenceServiceArgs"]
