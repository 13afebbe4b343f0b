"""`python -m infra promote`: the everyday traffic moves, made in the stack file itself.

The file is edited as a round trip (ruamel.yaml): comments, key order, quoting and encrypted
`secure:` values stay exactly as they were, so the pull request shows only the move. The result
is validated by the program's own schema before anything is written, and the render diff of
the move is printed for the reviewer.
"""

from __future__ import annotations

import io
import os
import sys
import tempfile
from collections.abc import Callable, Mapping, MutableMapping, MutableSequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.util import load_yaml_guess_indent

from inference_platform.analysis.rollout_decisions import promotion_warning
from inference_platform.cli.chart_expansion import ChartObjects, Expansion, expand_render
from inference_platform.cli.diff import diff_renders, markdown_report
from inference_platform.cli.environment import (
    Environment,
    environment_of,
    holder,
    platform_render_outputs,
    read_environment,
    read_shard,
)
from inference_platform.cli.positions import PositionIndex, in_file, parser_stop
from inference_platform.cli.render import RenderResult, run_program
from inference_platform.cli.render_files import render_texts, write_render
from inference_platform.cli.stack_file import (
    read_stack_file,
    read_stack_text,
    refuse_repeated_keys,
    stack_file_from_document,
)
from inference_platform.cli.yaml_edit import append_item, comment_lines, delete_key, remove_item, replace_key, set_key
from inference_platform.config.errors import ConfigError
from inference_platform.config.limits import nesting_problem
from inference_platform.stack.config import PROJECT, StackConfig, parse_stack_config, project_values

MODELS_KEY = f"{PROJECT}:models"


class PromotionError(Exception):
    """The move cannot be made as asked; nothing was written."""


@dataclass(frozen=True)
class Promotion:
    model: str
    weights: dict[str, int] = field(default_factory=dict)
    mirrors: dict[str, float] = field(default_factory=dict)
    add_version: str | None = None
    model_uri: str | None = None
    retire: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.weights or self.mirrors or self.add_version or self.model_uri or self.retire)


def parse_assignments(text: str, option: str, number: Callable[[str], float]) -> dict[str, Any]:
    """'v1=50,v2=50' -> {'v1': 50, 'v2': 50}."""
    result: dict[str, Any] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise PromotionError(f"{option}: write <version>=<number>, not {item!r}")
        try:
            result[name.strip()] = number(value.strip())
        except ValueError:
            raise PromotionError(f"{option}: {value.strip()!r} is not a number (in {item!r})") from None
    if not result:
        raise PromotionError(f"{option}: name at least one version")
    return result


def find_model(config: Mapping[str, Any], name: str) -> MutableMapping[str, Any]:
    models = config.get(MODELS_KEY)
    if not isinstance(models, MutableSequence):
        raise PromotionError(f"the stack file has no {MODELS_KEY} list")
    for model in models:
        if isinstance(model, MutableMapping) and model.get("name") == name:
            return model
    known = ", ".join(str(m.get("name")) for m in models if isinstance(m, Mapping))
    raise PromotionError(f"no model named {name!r} in the stack (models: {known or 'none'})")


def find_version(versions: MutableSequence[Any], name: str, model: str) -> CommentedMap:
    for version in versions:
        if isinstance(version, CommentedMap) and version.get("name") == name:
            return version
    known = ", ".join(str(v.get("name")) for v in versions if isinstance(v, Mapping))
    raise PromotionError(f"model {model!r} has no version {name!r} (versions: {known})")


def set_weight(version: CommentedMap, weight: int) -> None:
    """A version's weight; a shadow given one goes live (the weight takes its mirrorPercent's place)."""
    if "mirrorPercent" in version and "weight" not in version:
        replace_key(version, "mirrorPercent", "weight", weight)
    else:
        delete_key(version, "mirrorPercent")
        set_key(version, "weight", weight)


def set_mirror(version: CommentedMap, name: str, percent: float) -> None:
    """A version's mirror share; a live version given one becomes a shadow, and 0 stops a shadow
    (the version stays deployed, idle at weight 0)."""
    if percent:
        share = int(percent) if float(percent).is_integer() else percent
        if "weight" in version and "mirrorPercent" not in version:
            replace_key(version, "weight", "mirrorPercent", share)
        else:
            delete_key(version, "weight")
            set_key(version, "mirrorPercent", share)
    elif "mirrorPercent" not in version:
        raise PromotionError(f"--mirror {name}=0: version {name!r} is not a shadow")
    elif "weight" in version:
        delete_key(version, "mirrorPercent")
        set_key(version, "weight", 0)
    else:
        replace_key(version, "mirrorPercent", "weight", 0)


def apply(document: MutableMapping[str, Any], promotion: Promotion) -> None:
    """Make the move on a round-trip document: add, then weights, then mirrors, then retire."""
    model = find_model(document.get("config") or {}, promotion.model)
    versions = model.get("versions")
    if not isinstance(versions, CommentedSeq):
        raise PromotionError(f"model {promotion.model!r} has no versions list")
    if promotion.add_version is not None:
        if promotion.model_uri is None:
            raise PromotionError("--add-version needs --model-uri: where the new version's files are")
        if any(isinstance(v, Mapping) and v.get("name") == promotion.add_version for v in versions):
            raise PromotionError(f"model {promotion.model!r} already has a version {promotion.add_version!r}")
        added = CommentedMap()
        added["name"] = promotion.add_version
        added["modelUri"] = promotion.model_uri
        added["weight"] = 0  # deployed but idle until a weight or a mirror says otherwise
        append_item(versions, added)
    elif promotion.model_uri is not None:
        raise PromotionError("--model-uri goes with --add-version")
    for name, weight in promotion.weights.items():
        set_weight(find_version(versions, name, promotion.model), weight)
    for name, percent in promotion.mirrors.items():
        set_mirror(find_version(versions, name, promotion.model), name, percent)
    for name in promotion.retire:
        retired = find_version(versions, name, promotion.model)
        remove_item(versions, next(i for i, version in enumerate(versions) if version is retired))


def _mapping_indent(text: str) -> int:
    """How far the file indents a mapping inside a mapping (2 when it never does)."""
    parent: tuple[int, str] | None = None
    for line in text.splitlines():
        content = line.strip()
        if not content or content.startswith("#"):
            continue
        depth = len(line) - len(line.lstrip(" "))
        if parent is not None and depth > parent[0] and not content.startswith("-"):
            return depth - parent[0]
        is_key = content.endswith(":") and not content.startswith("-")
        parent = (depth, content) if is_key else None
    return 2


def round_trip(text: str, path: Path) -> tuple[YAML, Any]:
    yaml = YAML()
    yaml.preserve_quotes = True
    yaml.width = sys.maxsize  # never re-wrap long lines
    try:
        # ruamel guesses how sequences are indented; a mapping's indent it leaves to us.
        _, sequence_indent, dash_offset = load_yaml_guess_indent(text)
        yaml.indent(mapping=_mapping_indent(text), sequence=sequence_indent or 2, offset=dash_offset or 0)
        document = yaml.load(text)
    except MarkedYAMLError as error:
        position, reason = parser_stop(path, error)
        raise PromotionError(f"{position}: the stack file is not valid YAML: {reason}") from None
    except YAMLError as error:
        raise PromotionError(f"the stack file is not valid YAML: {error}") from None
    except RecursionError:
        raise PromotionError("the stack file nests values too deeply to edit") from None
    problem = nesting_problem(document)
    if problem is not None:
        raise PromotionError(f"the stack file {problem}")
    return yaml, document


def dump(yaml: YAML, document: Any) -> str:
    buffer = io.StringIO()
    yaml.dump(document, buffer)
    return buffer.getvalue()


def edit(text: str, promotion: Promotion, path: Path) -> str:
    """The stack file's text after the move; `path` is the file's, for errors."""
    yaml, document = round_trip(text, path)
    if not isinstance(document, MutableMapping):
        raise PromotionError("the stack file is not a mapping")
    apply(document, promotion)
    return dump(yaml, document)


def _validate(text: str, path: Path) -> None:
    """Validate the edited text; its problems point at their lines in it (the file as the move would leave it)."""
    _, document = round_trip(text, path)
    index = PositionIndex(document)
    try:
        stack_file = stack_file_from_document(document, path)
    except ConfigError as error:
        raise in_file(error, path, index, namespace=None) from None
    try:
        parse_stack_config(project_values(stack_file.config))
    except ConfigError as error:
        raise in_file(error, path, index) from None


def _check_comments(original: str, edited: str, path: Path) -> None:
    """Refuse a result that lost or reordered a comment: the edits above keep them all, and a file
    they did not foresee must not lose one silently."""
    before = comment_lines(round_trip(original, path)[1])
    after = comment_lines(round_trip(edited, path)[1])
    if before != after:
        lost = next((line for line in before if line not in after), None)
        what = f"lose the comment {lost!r}" if lost is not None else "move comments out of their order"
        raise PromotionError(f"the move would {what}: make it by hand")


def check_edit(environment: Environment | None, path: Path, original: str, edited: str, scratch: Path) -> None:
    """Refuse an edit of the stack file at `path` that would leave it (or, in an environment of several
    stacks, the environment) invalid, or that lost a comment; `scratch` a directory that does not exist
    yet, for the environment's files as the edit would leave them."""
    try:
        if environment is None:
            _validate(edited, path)
        else:
            _validate_environment(environment, path, edited, scratch)
    except ConfigError as error:
        raise ConfigError(
            error.problems,
            incomplete=error.incomplete,
            preface="the move would leave the stack invalid; nothing was written",
        ) from None
    _check_comments(original, edited, path)


def _render(stack: str, path: Path, out: Path, expansion: Expansion | None) -> str | None:
    """The stack file at `path` rendered into `out`, its charts expanded as `expansion` says (None:
    not at all); why they were not, where they were asked for."""
    stack_file = read_stack_file(path)
    result = run_program(stack, stack_file)
    return _write(result, lambda: parse_stack_config(project_values(stack_file.config)), out, expansion)


def _write(
    result: RenderResult, config: Callable[[], StackConfig], out: Path, expansion: Expansion | None
) -> str | None:
    """The render written into `out`; `config`, the stack's config (its Kubernetes version picks
    the charts' capabilities), read only where charts are expanded."""
    chart_objects: ChartObjects = {}
    why_not = None
    if expansion is not None:
        chart_objects, why_not = expand_render(result, config().platform.kubernetes_version, expansion)
    write_render(render_texts(result, chart_objects), out)
    return why_not


def _validate_environment(environment: Environment, path: Path, edited: str, copy: Path) -> None:
    """The environment, with the shard file at `path` as the move would leave it, validated whole
    (a copy of its files under `copy`); the problems point at the real files' lines."""
    copy.mkdir()
    for stack in (environment.platform, *environment.shards):
        source = environment.path(stack)
        if source.is_file():
            (copy / source.name).write_text(read_stack_text(source), encoding="utf-8")
    (copy / path.name).write_text(edited, encoding="utf-8")
    try:
        read_environment(copy / f"Pulumi.{environment.platform}.yaml", environment.platform)
    except ConfigError as error:
        raise error.with_problems(
            replace(problem, position=problem.position.replace(str(copy), str(environment.directory)))
            for problem in error.problems
        ) from None


def _render_shard(environment: Environment, stack: str, out: Path, expansion: Expansion | None) -> str | None:
    """A shard rendered on its platform stack's outputs, both from the environment's files."""
    outputs = platform_render_outputs(environment)
    path = environment.path(stack)
    result = run_program(stack, read_stack_file(path), stack_outputs={environment.platform: outputs})
    # A shard's file alone is no whole config (the platform's settings come from its outputs).
    return _write(result, lambda: read_shard(path, stack, outputs)[1], out, expansion)


def rollout_warning(edited: str, path: Path, model: str, environment: Environment | None, copy: Path) -> str | None:
    """What the move (`edited`, the stack file's text as it leaves it, validated) does to the model's
    running rollout (analysis/rollout_decisions.py); None where it has none running. In an
    environment of several stacks the model is read from the environment's config as the move leaves
    it (`copy`, where check_edit wrote its files): a shard's file alone is no whole config."""
    if environment is None:
        _, document = round_trip(edited, path)
        config = parse_stack_config(project_values(stack_file_from_document(document, path).config))
    else:
        _, config, _ = read_environment(copy / f"Pulumi.{environment.platform}.yaml", environment.platform)
    return promotion_warning(next(m for m in config.models if m.name == model))


def promote(
    stack: str, path: Path, promotion: Promotion, out: TextIO, expansion: Expansion | None = None
) -> str | None:
    """Edit, validate, show the render diff, then write. Raises PromotionError or ConfigError (or
    ChartsUnavailableError, where `expansion` names a directory that cannot serve a chart). In an
    environment of several stacks (`stack` its platform stack or any shard) the file edited is the
    shard's that holds the model, and the whole environment is validated with it. The renders
    compared expand their charts as `expansion` says (`infra render`'s options; None: not at all),
    so the diff has `infra diff`'s chart objects section. Returns a warning where the model's
    rollout is running (the move pauses it, or its next step undoes it)."""
    if promotion.empty:
        raise PromotionError("nothing to do: give --weights, --mirror, --add-version or --retire")
    try:
        environment = environment_of(stack, path)
    except ConfigError:
        environment = None  # the file's own problems are reported below, as for any stack
    if environment is not None:
        found = holder(environment, promotion.model)
        if found is None:
            raise PromotionError(
                f"no shard of the environment {environment.platform} holds the model {promotion.model!r}"
            )
        stack, path = found, environment.path(found)
    original = read_stack_text(path)
    refuse_repeated_keys(original, path)  # as every command does: the round trip would call it invalid YAML
    edited = edit(original, promotion, path)
    with tempfile.TemporaryDirectory(prefix="promote-") as scratch:
        root = Path(scratch)
        check_edit(environment, path, original, edited, root / "proposed")
        warning = rollout_warning(edited, path, promotion.model, environment, root / "proposed")
        if environment is None:
            proposed = root / path.name
            proposed.write_text(edited, encoding="utf-8")
            why_not = _render(stack, path, root / "before", expansion)
            _render(stack, proposed, root / "after", expansion)
        else:
            why_not = _render_shard(environment, stack, root / "before", expansion)
            _render_shard(replace(environment, directory=root / "proposed"), stack, root / "after", expansion)
        out.write(markdown_report(diff_renders(root / "before", root / "after")))
        if why_not is not None and why_not.startswith("not expanded"):
            out.write(f"\nChart objects {why_not}\n")
    staged = path.with_name(f".{path.name}.promote")
    staged.write_text(edited, encoding="utf-8")
    os.replace(staged, path)
    return warning
