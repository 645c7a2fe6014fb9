"""``yaml-parse`` and ``json-parse``: read a file and publish values from it as outputs
(:func:`make_parse_step` also makes ``toml-parse``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import yaml as pyyaml

from promoter.errors import ConfigRefused, StepError
from promoter.expressions import ExpressionError, evaluate_expression
from promoter.expressions.compiler import ENVIRONMENT
from promoter.steps.base import (
    Config,
    Effect,
    FunctionStep,
    Step,
    StepContext,
    StepFunction,
    StepResult,
    succeeded,
)
from promoter.steps.workdir.files import existing_file, one_line, read_text, scalar_text


class _PlainYamlLoader(pyyaml.SafeLoader):
    """SafeLoader that keeps timestamps as strings, as Kargo's YAML-to-JSON decoding does."""


_PlainYamlLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in pyyaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _string_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            scalar_text(key) if not isinstance(key, str) else key: _string_keys(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_string_keys(item) for item in value]
    return value


# ``(text, path as configured) -> document``; raises a terminal StepError for text it cannot read.
Loader = Callable[[str, str], Any]


def _load_for_parse(ctx: StepContext, kind: str, raw_path: str, load: Loader) -> dict[str, Any]:
    text = read_text(existing_file(ctx, kind, raw_path), kind, raw_path)
    if not text.strip():
        raise StepError(f"{kind}: {raw_path!r} is empty", terminal=True)
    data = _string_keys(load(text, raw_path))
    # Kargo runs the expressions with the document as expr-lang's environment: `$env[0]` and
    # `len($env)` read a list root; ours also names it `root`.
    return data if isinstance(data, dict) else {"root": data, ENVIRONMENT: data}


def _load_json_or_yaml(kind: str) -> Loader:
    def load(text: str, raw_path: str) -> Any:
        try:
            if kind == "json-parse":
                return json.loads(text)
            return pyyaml.load(text, _PlainYamlLoader)
        except (ValueError, pyyaml.YAMLError) as err:
            fmt = "JSON" if kind == "json-parse" else "YAML"
            raise StepError(
                f"{kind}: {raw_path!r} is not valid {fmt}: {one_line(err)}", terminal=True
            ) from None

    return load


def make_parse_step(kind: str, load: Loader | None = None) -> StepFunction:
    """A ``<format>-parse`` step: read ``config.path`` with ``load`` (JSON or YAML by default)
    and publish ``config.outputs[]`` (``name``, ``fromExpression``) evaluated against it."""
    loader = load or _load_json_or_yaml(kind)

    async def parse(ctx: StepContext, config: Mapping[str, Any]) -> StepResult:
        cfg = Config(kind, config)
        raw_path = cfg.str("path")
        outputs = cfg.items("outputs", required=True)
        if not outputs:
            raise ConfigRefused(f"{kind}: config.outputs must list at least one output")
        rules = [(item.str("name"), item.str("fromExpression")) for item in outputs]
        document = await ctx.services.io.call(_load_for_parse, ctx, kind, raw_path, loader)
        # Kargo evaluates against the document alone; `ctx` is added because Kargo's own
        # file-write example uses `apps[ctx.stage]`. A document key named `ctx` wins: it is
        # what the file's author meant.
        variables: dict[str, Any] = {
            "ctx": {"stage": ctx.stage, "project": ctx.project, "promotion": ctx.promotion},
            **document,
        }
        results: dict[str, Any] = {}
        for index, (name, source) in enumerate(rules):
            where = f"config.outputs[{index}].fromExpression"
            try:
                results[name] = evaluate_expression(source, variables, where=where)
            except ExpressionError as err:
                # The error's message already names `where` and the expression.
                raise StepError(f"{kind}: {err}", terminal=True) from None
        return succeeded(results, message=f"read {len(results)} value(s) from {raw_path}")

    parse.__name__ = kind.replace("-", "_")
    return parse


yaml_parse = make_parse_step("yaml-parse")
json_parse = make_parse_step("json-parse")


# They read and write the work directory only: a replay runs them again.
STEPS: dict[str, Step] = {
    "yaml-parse": FunctionStep(yaml_parse, effect=Effect.LOCAL),
    "json-parse": FunctionStep(json_parse, effect=Effect.LOCAL),
}
