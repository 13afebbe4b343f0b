"""One model served on the platform: see component.py for the resource, manifests.py for its objects."""

from components.inference_service.component import InferenceService
from components.inference_service.manifests import InferenceServiceArgs

__all__ = ["InferenceService", "InferenceServiceArgs"]
