"""What a platform team writes about one inference pipeline: a graph shaped as KServe's
InferenceGraph shapes it (nodes of Sequence, Switch, Ensemble or Splitter steps), run by KServe's
own router in front of the stack's models.

Each key here is a key of the InferenceGraph CRD's `spec.nodes` schema, except that a step names a
`model` of the stack (KServe's `serviceName`, whose `serviceUrl` the program derives) or another
`node` (KServe's `nodeName`). The checks below are the ones the router itself does not make: it
would start, then fail requests.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from inference_platform.config.base import (
    ConfigModel,
    DNS1035Label,
    Duration,
    Matches,
    PinnedImage,
    config_problems,
    duration_nanoseconds,
    duration_seconds,
    find_cycles,
)
from inference_platform.serving.autoscaling import AutoscalingSpec
from inference_platform.serving.inference_pool import Routing
from inference_platform.serving.model_spec import RetryPolicy
from inference_platform.serving.protection import Protection
from inference_platform.serving.resources import ResourceList, Resources

ROOT_NODE = "root"
"""The router starts every request at this node (KServe's GraphRootNodeName)."""
# The router's HTTP server cuts every response at one minute (its WriteTimeout).
ROUTER_WRITE_TIMEOUT_SECONDS = 60

RouterType = Literal["Sequence", "Switch", "Ensemble", "Splitter"]
NodeName = Annotated[
    str,
    Field(max_length=63),
    Matches(
        r"^[a-zA-Z0-9]([-_a-zA-Z0-9]*[a-zA-Z0-9])?$",
        "a node name: letters, digits, '-' and '_', starting and ending with a letter or digit",
    ),
]
# A header name pattern (a Go regular expression); the router reads them comma-separated.
HeaderPattern = Annotated[str, Field(max_length=256), Matches(r"^[^,\s]+$", "a value without commas or spaces")]

ROUTER_RESOURCES = Resources(
    requests=ResourceList(cpu="100m", memory="100Mi"),
    limits=ResourceList(cpu="1", memory="1Gi"),
)


class GraphStep(ConfigModel):
    """One step of a node: a call to a model of the stack, or to another node of the graph."""

    name: Annotated[str, Field(min_length=1, max_length=253)] | None = Field(
        default=None, description="The step's name; an Ensemble keys each step's response by it."
    )
    model: DNS1035Label | None = Field(default=None, description="A model of this stack (KServe's serviceName).")
    node: NodeName | None = Field(default=None, description="Another node of this pipeline (KServe's nodeName).")
    data: Literal["$request", "$response"] | None = Field(
        default=None, description="In a Sequence, what this step receives: the request, or the previous response."
    )
    condition: Annotated[str, Field(min_length=1)] | None = Field(
        default=None,
        description="A GJSON path: a Switch takes the first step whose path exists in the request; a "
        "Sequence step runs only when it exists in the previous response.",
    )
    weight: Annotated[int, Field(ge=0, le=100)] | None = Field(
        default=None, description="A Splitter's share of requests for this step, in percent."
    )
    dependency: Literal["Soft", "Hard"] | None = Field(
        default=None, description="Hard: a failure of this step ends the node with that failure."
    )

    @model_validator(mode="after")
    def _one_target(self) -> GraphStep:
        if self.model is not None and self.node is not None:
            raise config_problems([("", "a step calls a model or a node, not both")])
        if self.model is None and self.node is None:
            raise config_problems([("", "set model (a model of this stack) or node (another node of this pipeline)")])
        return self


class GraphNode(ConfigModel):
    router_type: RouterType = Field(description="Sequence, Switch, Ensemble or Splitter, as in KServe.")
    steps: Annotated[list[GraphStep], Field(min_length=1)] = Field(
        description="The node's steps: each names a model of the stack or another node of the graph."
    )

    def problems(self) -> list[tuple[str, str]]:
        """What the router type needs of the steps (paths relative to the node)."""
        problems: list[tuple[str, str]] = []
        for index, step in enumerate(self.steps):
            if self.router_type == "Splitter" and step.weight is None:
                problems.append((f"steps[{index}].weight", "a Splitter step needs a weight"))
            if self.router_type != "Splitter" and step.weight is not None:
                problems.append(
                    (f"steps[{index}].weight", f"only Splitter steps take a weight, not {self.router_type}")
                )
            if self.router_type == "Switch" and step.condition is None:
                problems.append(
                    (f"steps[{index}].condition", "a Switch step needs a condition (a GJSON path in the request)")
                )
        if self.router_type == "Splitter" and not problems:
            total = sum(step.weight or 0 for step in self.steps)
            if total != 100:
                problems.append(("steps", f"Splitter weights add up to {total}; they must add up to 100"))
        return problems


ROUTER_DOES_NOT_SLEEP = "a pipeline's router does not sleep: set 1 or more"


class PipelineAutoscalingSpec(AutoscalingSpec):
    """A pipeline router's scaling: a model's settings, less sleeping at zero (its router must
    answer the first request itself)."""

    min_replicas: Annotated[int, Field(ge=0, le=1000)] = Field(
        default=1, description="1 or more: a pipeline's router does not sleep at zero replicas (0 is refused)."
    )
    idle_after: Duration = Field(
        default="15m", description="Not for a pipeline: its router does not sleep (refused when set)."
    )
    wake: Literal["hold", "respond"] = Field(
        default="hold", description="Not for a pipeline: its router does not sleep (refused when set)."
    )


class PipelineSpec(ConfigModel):
    """One pipeline: its graph, and how its router runs."""

    name: DNS1035Label = Field(description="Served at <name>.<domain> and <domain>/pipelines/<name>/.")
    nodes: dict[NodeName, GraphNode] = Field(description="The graph; requests start at the node named root.")
    replicas: Annotated[int, Field(ge=1, le=1000)] = Field(
        default=1, description="Router pods; not with an autoscaling range."
    )
    autoscaling: PipelineAutoscalingSpec = Field(
        default=PipelineAutoscalingSpec(), description="Scales the router on requestsPerSecond or CPU."
    )
    propagate_headers: list[HeaderPattern] = Field(
        default_factory=list,
        description="Request headers (Go regular expressions) the router passes on to every step; "
        "its PROPAGATE_HEADERS.",
    )
    timeout: Duration = Field(
        default="60s", description="Request timeout at the gateway; the router itself stops at 60s."
    )
    retries: RetryPolicy = Field(default=RetryPolicy(), description="Retries at the gateway, as for a model.")
    resources: Resources = Field(default=Resources(), description="The router container's requests and limits.")
    image: PinnedImage | None = Field(default=None, description="Overrides the pinned KServe router image (a mirror).")
    protection: Protection = Field(
        default_factory=Protection, description="Rate limit, client access, JWT and circuit breaking."
    )
    routing: Routing = Field(
        default="virtual-service",
        description="virtual-service, always: the router is no LLM engine an inference pool's picker could read.",
    )

    @model_validator(mode="after")
    def _routed_by_its_virtual_service(self) -> PipelineSpec:
        if self.routing != "virtual-service":
            message = (
                "a pipeline's router has no queue or KV cache for an endpoint picker to read: it is routed "
                "through its VirtualService (its models may use inference pools)"
            )
            raise config_problems([("routing", message)])
        return self

    @model_validator(mode="after")
    def _graph(self) -> PipelineSpec:
        problems: list[tuple[str, str]] = []
        if ROOT_NODE not in self.nodes:
            problems.append(("nodes", f"no node named '{ROOT_NODE}': the router starts every request there"))
        for name, node in self.nodes.items():
            problems += [(f"nodes.{name}.{path}", message) for path, message in node.problems()]
            for index, step in enumerate(node.steps):
                if step.node is not None and step.node not in self.nodes:
                    problems.append(
                        (f"nodes.{name}.steps[{index}].node", f"'{step.node}' is not a node of this pipeline")
                    )
        edges = {
            name: [s.node for s in node.steps if s.node is not None and s.node in self.nodes]
            for name, node in self.nodes.items()
        }
        for cycle in find_cycles(edges):
            closing, target = cycle[-2], cycle[-1]
            index = next(i for i, s in enumerate(self.nodes[closing].steps) if s.node == target)
            problems.append(
                (f"nodes.{closing}.steps[{index}].node", f"nodes go round in a circle: {' -> '.join(cycle)}")
            )
        if duration_seconds(self.timeout) > ROUTER_WRITE_TIMEOUT_SECONDS:
            problems.append(("timeout", f"{self.timeout} is longer than the router's own limit of 60s"))
        per_try = self.retries.per_try_timeout
        if per_try is not None and duration_nanoseconds(per_try) > duration_nanoseconds(self.timeout):
            problems.append(
                ("retries.perTryTimeout", f"{per_try} is longer than the pipeline's timeout ({self.timeout})")
            )
        problems += self._autoscaling_problems()
        if problems:
            raise config_problems(problems)
        return self

    def _autoscaling_problems(self) -> list[tuple[str, str]]:
        """What a router cannot scale on: it has no GPU, no engine queue and generates no tokens."""
        scaling = self.autoscaling
        problems = [
            (f"autoscaling.{key}", f"a router {lacks}: scale on requestsPerSecond or CPU")
            for key, target, lacks in (
                ("gpuUtilization", scaling.gpu_utilization, "has no GPU"),
                ("queueDepth", scaling.queue_depth, "has no engine queue"),
                ("timeToFirstTokenP90", scaling.time_to_first_token_p90, "generates no tokens"),
            )
            if target is not None
        ]
        if scaling.scales_to_zero:
            problems.append(("autoscaling.minReplicas", ROUTER_DOES_NOT_SLEEP))
        if "autoscaling" in self.model_fields_set and "replicas" in self.model_fields_set:
            problems.append(("replicas", "set replicas or autoscaling, not both: autoscaling's bounds decide replicas"))
        return problems

    @property
    def models(self) -> list[str]:
        """The models the graph calls, each once, in the order the graph names them."""
        return list(dict.fromkeys(s.model for node in self.nodes.values() for s in node.steps if s.model is not None))

    @property
    def fixed_replicas(self) -> int:
        return self.autoscaling.min_replicas if "autoscaling" in self.model_fields_set else self.replicas

    def first_model(self) -> str | None:
        """The model a request reaches first, following each node's first step from root."""
        seen: set[str] = set()
        node = self.nodes.get(ROOT_NODE)
        while node is not None:
            step = node.steps[0]
            if step.model is not None:
                return step.model
            if step.node is None or step.node in seen:
                return None
            seen.add(step.node)
            node = self.nodes.get(step.node)
        return None
