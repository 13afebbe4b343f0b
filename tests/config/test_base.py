"""The value types Kubernetes imposes on config, checked against Kubernetes' own parsers."""

from __future__ import annotations

import pytest
from kubernetes.utils import parse_quantity
from pydantic_core import PydanticCustomError

from inference_platform.config.base import (
    check_pinned_image,
    check_quantity,
    duration_nanoseconds,
    quantity_sum,
    quantity_value,
)

CANDIDATES = ["1", "500m", "250u", "100n", "1.5", ".5", "2k", "1.5Gi", "512Mi", "3e2", "1E3", "2Ei", "1P"]
# Not quantities, and (the last) a negative one: sizes and requests in config are never negative.
REFUSED = ["", "1.5 Gi", "5mi", "Ki", "1x", "1,5", "0x10", "-1"]


@pytest.mark.parametrize("text", CANDIDATES)
def test_quantities_kubernetes_reads_are_accepted(text: str) -> None:
    parse_quantity(text)  # Kubernetes' client reads it

    assert check_quantity(text) == text


@pytest.mark.parametrize("text", REFUSED)
def test_what_is_not_a_quantity_or_is_negative_is_refused(text: str) -> None:
    with pytest.raises(PydanticCustomError):
        check_quantity(text)


@pytest.mark.parametrize("text", CANDIDATES)
def test_a_quantitys_value_is_the_one_kubernetes_reads(text: str) -> None:
    assert quantity_value(text) == parse_quantity(text)


@pytest.mark.parametrize(
    ("values", "total"),
    [(["20Gi", "2Gi"], "22Gi"), (["20Gi", "512Mi"], "20992Mi"), (["1.5Gi"], "1536Mi"), (["10G", "1"], "10000000001")],
)
def test_quantities_add_up_to_what_kubernetes_reads_as_their_sum(values: list[str], total: str) -> None:
    """Written in the largest binary unit that holds the sum whole (the storage a pod's downloads request)."""
    assert quantity_sum(values) == total
    assert parse_quantity(total) == sum(parse_quantity(value) for value in values)


@pytest.mark.parametrize(
    ("a", "b"),
    [("102ms", "0.102s"), ("1m30s", "90s"), ("1h", "3600s"), ("1500us", "1.5ms"), ("0.1s", "100000000ns")],
)
def test_durations_compare_exactly_in_any_unit(a: str, b: str) -> None:
    assert duration_nanoseconds(a) == duration_nanoseconds(b)
    assert duration_nanoseconds(a) < duration_nanoseconds(b + "1ns")


DIGEST = "sha256:" + "f" * 64
# From distribution/reference's own test table (reference_test.go), each with a tag or digest.
PINNED = [
    "test.com:tag",
    "test:5000/repo:tag",
    f"test:5000/repo@{DIGEST}",
    f"test:5000/repo:tag@{DIGEST}",
    "lowercase:Uppercase",
    "sub-dom1.foo.com/bar/baz/quux:some-long-tag",
    "b.gcr.io/test.example.com/my-app:test.example.com",
    "xn--n3h.com/myimage:xn--n3h.com",
    "nvcr.io/nvidia/tritonserver:24.08-py3",
]
NOT_REFERENCES = [
    "",
    ":justtag",
    f"@{DIGEST}",
    "Uppercase:tag",
    "aa/asdf$$^/aa:1",
    "repo@sha256:ffff",
    "s3:///nobucket",
]
UNPINNED = ["test_com", "test:5000/repo", "pytorch/torchserve", "seldonio/mlserver:latest"]


@pytest.mark.parametrize("image", PINNED)
def test_pinned_image_references_are_accepted(image: str) -> None:
    assert check_pinned_image(image) == image


@pytest.mark.parametrize(("images", "kind"), [(NOT_REFERENCES, "image_reference"), (UNPINNED, "image_not_pinned")])
def test_what_is_no_reference_or_not_pinned_is_refused(images: list[str], kind: str) -> None:
    for image in images:
        with pytest.raises(PydanticCustomError) as error:
            check_pinned_image(image)
        assert error.value.type == kind, image
