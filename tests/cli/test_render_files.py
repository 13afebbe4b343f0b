"""Reading a render directory's files by their text: each document's own text (what `infra diff`
compares first)."""

from __future__ import annotations

from pathlib import Path

import pytest

from inference_platform.cli.render_files import document_texts, dump_documents, load_documents
from tests.stacks.conftest import shared_render

PLAIN = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "b"}, "data": {"k": "v"}}


def test_every_file_of_a_render_splits_into_its_documents(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The prod stack with its charts (objects of Helm's, block scalars, URLs): each file's
    documents, one text each, parse to the file's objects, each written back as that very text."""
    render = shared_render("prod", tmp_path_factory).directory
    files = sorted(render.rglob("*.yaml"))
    assert len(files) > 5
    documents = 0
    for path in files:
        text = path.read_text(encoding="utf-8")
        texts = document_texts(text)
        assert texts is not None, path
        assert "".join(texts) == text.removeprefix("---\n").replace("\n---\n", "\n"), path
        parsed = [load_documents(part) for part in texts]
        assert [doc for docs in parsed for doc in docs] == load_documents(text), path
        assert all(len(docs) == 1 for docs in parsed), path
        assert [dump_documents(docs) for docs in parsed] == texts, path
        documents += len(texts)
    assert documents > 200


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
