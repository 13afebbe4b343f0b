"""Reading a render directory's files by their text: each document's own text, and the fields that
label an object read off it without parsing the rest (what `infra diff` compares first)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from inference_platform.cli.diff import CHART_LABEL_FIELDS
from inference_platform.cli.render_files import (
    OBJECT_KEY_FIELDS,
    document_texts,
    dump_documents,
    identity_fields,
    load_documents,
)
from tests.stacks.conftest import shared_render

FIELDS = (*OBJECT_KEY_FIELDS, *CHART_LABEL_FIELDS)
"""What the diff's labels read: an object's, and a charts.yaml entry's."""


def parsed_fields(document: dict[str, Any], fields: tuple[str, ...] = FIELDS) -> dict[str, Any]:
    """`fields` of a parsed document, as identity_fields gives them."""
    found: dict[str, Any] = {}
    for field in fields:
        parent, _, child = field.partition(".")
        if parent in document and not child:
            found[parent] = document[parent]
        elif parent in document:
            found.setdefault(parent, {})
            if child in document[parent]:
                found[parent][child] = document[parent][child]
    return found


def test_every_document_of_a_render_reads_as_its_parser_reads_it(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The prod stack with its charts (objects of Helm's, `system:` names, URLs): each file's
    documents, one text each, parse to the file's objects, and their labels' fields read off the
    text are the parser's."""
    render = shared_render("prod", tmp_path_factory).directory
    files = sorted(render.rglob("*.yaml"))
    assert len(files) > 5
    read = total = 0
    for path in files:
        text = path.read_text(encoding="utf-8")
        texts = document_texts(text)
        assert texts is not None, path
        assert "".join(texts) == text.removeprefix("---\n").replace("\n---\n", "\n"), path
        assert [doc for part in texts for doc in load_documents(part)] == load_documents(text), path
        for part in texts:
            fields = identity_fields(part, FIELDS)
            (document,) = load_documents(part)
            assert fields is None or fields == parsed_fields(document), (path, part[:200])
            read += fields is not None
            total += 1
    assert read == total > 200  # every one: none needs parsing to be labelled


PLAIN = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "b"}, "data": {"k": "v"}}


@pytest.mark.parametrize(
    ("document", "read"),
    [
        (PLAIN, True),
        ({"kind": "ClusterRole", "metadata": {"name": "system:auth-delegator", "labels": {"x": "y"}}}, True),
        ({"name": "lws", "kind": "helm.v4.Chart", "chart": "oci://registry.k8s.io/lws/charts/lws"}, True),
        ({"apiVersion": "v1", "kind": "Namespace", "metadata": {"labels": {"name": "a"}, "name": "b"}}, True),
        ({"apiVersion": "v1", "kind": "List", "items": [{"kind": "Pod"}], "metadata": {"name": "x"}}, True),
        # Written otherwise than as one plain word: left to the parser (None), never misread.
        (PLAIN | {"kind": "true"}, False),
        (PLAIN | {"kind": True}, False),
        (PLAIN | {"metadata": {"name": "1234"}}, False),
        (PLAIN | {"metadata": {"name": 1234}}, False),
        (PLAIN | {"metadata": {"name": None}}, False),
        (PLAIN | {"metadata": {"name": "two words"}}, False),
        (PLAIN | {"metadata": {"name": "x" * 150 + " wrapped " + "y" * 150}}, False),
        (PLAIN | {"metadata": {"name": "ends-with:"}}, False),
        (PLAIN | {"metadata": {}}, False),
        (PLAIN | {"metadata": None}, False),
        (PLAIN | {"metadata": ["name"]}, False),
        (PLAIN | {"metadata": "name: x"}, False),
        ({"kind": "x", "namespace": None, "name": "crds", "file": "https://x/y.yaml"}, False),
        ({"kind": "x", "'quoted'": 1, "metadata": {"name": "a"}}, False),
        ({"kind": "x", "k" * 200: 1}, False),  # a key too long to be a simple key
    ],
)
def test_fields_are_read_as_the_parser_reads_them_or_left_to_it(document: dict[str, Any], read: bool) -> None:
    (text,) = document_texts(dump_documents([document])) or [""]
    fields = identity_fields(text, FIELDS)
    assert (fields is not None) == read, text
    if fields is not None:
        assert fields == parsed_fields(load_documents(text)[0])


def test_a_hand_written_document_is_left_to_the_parser() -> None:
    assert identity_fields("'kind': ConfigMap\nmetadata:\n  name: a\n", FIELDS) is None  # a quoted key
    assert identity_fields("kind: ConfigMap\n? name\n: a\n", FIELDS) is None  # a complex key
    assert identity_fields("kind: ConfigMap\nmetadata:\n    name: a\n", FIELDS) is None  # indented otherwise
    assert identity_fields("kind: ConfigMap\nmetadata:\n- name: a\n", FIELDS) is None  # a list
    assert identity_fields("kind: &k ConfigMap\n", FIELDS) is None  # an anchor
    assert identity_fields("kind: ConfigMap # a comment\n", FIELDS) is None
    assert identity_fields("  kind: ConfigMap\n", FIELDS) is None
    assert identity_fields("kind: ConfigMap\nmetadata:\n  name: a\n...\n", FIELDS) == {
        "kind": "ConfigMap",
        "metadata": {"name": "a"},
    }


def test_files_in_another_shape_are_parsed_whole() -> None:
    assert document_texts("") == []
    assert document_texts("a: 1\n---\nb: 2\n") == ["a: 1\n", "b: 2\n"]
    assert document_texts("---\na: 1\n") == ["a: 1\n"]
    assert document_texts("--- text\n") is None  # a scalar document on its `---` line
    assert document_texts("a: 1\n--- !tag\nb: 2\n") is None
    assert document_texts("%YAML 1.1\n---\na: 1\n") is None
    assert document_texts("a: |\n  ---\n  x\n") == ["a: |\n  ---\n  x\n"]  # inside a block, not a separator


def test_a_render_file_splits_into_the_documents_it_was_written_from(tmp_path: Path) -> None:
    documents = [PLAIN, {"kind": "Secret", "metadata": {"name": "s"}, "stringData": {"x": "line\n---\nline\n\n"}}]
    text = dump_documents(documents)
    texts = document_texts(text) or []
    assert [load_documents(part)[0] for part in texts] == documents
    assert [dump_documents([document]) for document in documents] == texts
