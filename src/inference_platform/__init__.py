"""An ML inference platform on Kubernetes as Pulumi components, kept in step with a team's models.

The package is layered; each layer imports only those below it (import-linter holds this):

- `config`: the base types every config model is written in, and config problems as people read them
- `kube`, `pins`: registering Kubernetes objects built as data; every image and chart version
- `platform`: the cluster platform, one chart-backed component each (Istio, Prometheus, ...)
- `serving`: one model (InferenceService) and one pipeline (Pipeline), and all they are made of
- `analysis`: comparing versions (rules, alerts, dashboards) and the GPU capacity plan
- `stack`: a whole stack from its config (the program `pulumi up` runs, and InferencePlatform)
- `provider`, `cli`: the component package for other languages; the command-line tools
"""

__version__ = "0.2.0"
