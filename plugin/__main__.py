"""The component package's plugin: Pulumi runs this to serve the library's components
(inference_platform.provider) to programs in any language."""

from inference_platform.provider.host import serve

if __name__ == "__main__":
    serve()
