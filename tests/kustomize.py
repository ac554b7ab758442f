"""A small kustomize: the resources `kubectl kustomize DIR` prints, for the features deploy/ uses.

No kustomize binary is installable from PyPI or Debian, so the deployment tests render the
kustomizations here: resources (files and directories), JSON 6902 patches and image overrides.
Anything else in a kustomization fails the test rather than being ignored. Shared by the
in-process manifest checks (tests/unit) and the linters that run as processes (tests/integration).
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
DEPLOY = REPO / "deploy"
BASE = DEPLOY / "kubernetes"
OVERLAYS = sorted(p for p in (DEPLOY / "overlays").iterdir() if (p / "kustomization.yaml").is_file())
BUNDLES = [BASE, *OVERLAYS]
BUNDLE_IDS = ["base", *(p.name for p in OVERLAYS)]
#: files `llm-bottleneck-exporter generate` writes into deploy/
GENERATED = {"prometheusrule.yaml", "dashboards-configmap.yaml"}
KUSTOMIZATION_KEYS = {"apiVersion", "kind", "resources", "patches", "images"}


def render(directory: Path) -> list[dict[str, Any]]:
    """The resources `kubectl kustomize directory` would print, for the features we use."""
    kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text())
    unsupported = set(kustomization) - KUSTOMIZATION_KEYS
    assert not unsupported, f"{directory}/kustomization.yaml uses {unsupported}, which render() does not implement"
    documents: list[dict[str, Any]] = []
    for entry in kustomization.get("resources", []):
        path = (directory / entry).resolve()
        if path.is_dir():
            documents += render(path)
            continue
        if not path.is_file():
            hint = " (generated: run `llm-bottleneck-exporter generate`)" if path.name in GENERATED else ""
            raise AssertionError(f"{directory.relative_to(REPO)}/kustomization.yaml: {entry} does not exist{hint}")
        for document in copy.deepcopy(_parsed(path, path.stat().st_mtime_ns)):  # patches change them
            if document.get("kind") == "List":
                documents += document["items"]
            else:
                documents.append(document)
    for patch in kustomization.get("patches", []):
        operations = yaml.safe_load((directory / patch["path"]).read_text())
        assert isinstance(operations, list), f"{patch['path']}: only JSON 6902 patches are implemented"
        targets = [d for d in documents if _selected(d, patch.get("target", {}))]
        assert targets, f"{patch['path']}: its target {patch.get('target')} matches no resource"
        for target in targets:
            for operation in operations:
                apply_operation(target, operation)
    for image in kustomization.get("images", []):
        for document in documents:
            for container in containers(document):
                name, _, tag = container["image"].partition(":")
                if name == image["name"]:
                    container["image"] = f"{image.get('newName', name)}:{image.get('newTag', tag)}"
    return documents


@functools.cache
def _parsed(path: Path, mtime_ns: int) -> tuple[dict[str, Any], ...]:
    """The documents of one file, parsed once per version of it: every overlay renders the base
    again, and the generated dashboards ConfigMap alone is half a megabyte of YAML."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml where PyYAML was built with it
    return tuple(document for document in yaml.load_all(path.read_text(), Loader=loader) if document)


def _selected(document: dict[str, Any], target: dict[str, str]) -> bool:
    metadata = document.get("metadata", {})
    return all(
        {"kind": document.get("kind"), "name": metadata.get("name"), "namespace": metadata.get("namespace")}.get(key)
        == value
        for key, value in target.items()
    )


def containers(document: dict[str, Any]) -> list[dict[str, Any]]:
    """The init and regular containers of a workload's pod template (none for other kinds)."""
    pod = document.get("spec", {}).get("template", {}).get("spec", {})
    return [*pod.get("initContainers", []), *pod.get("containers", [])]


def apply_operation(document: dict[str, Any], operation: dict[str, Any]) -> None:
    """One RFC 6902 operation (add, remove, replace, test) on the document, in place."""
    *parents, last = [p.replace("~1", "/").replace("~0", "~") for p in operation["path"].split("/")[1:]]
    node: Any = document
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    op = operation["op"]
    if isinstance(node, list):
        index = len(node) if last == "-" else int(last)
        if op == "add":
            node.insert(index, copy.deepcopy(operation["value"]))
        elif op == "remove":
            del node[index]
        elif op == "replace":
            node[index] = copy.deepcopy(operation["value"])
        elif op == "test":
            assert node[index] == operation["value"], f"test failed at {operation['path']}: {node[index]!r}"
        else:
            raise AssertionError(f"op {op!r} is not implemented")
    elif op in ("add", "replace"):
        assert op == "add" or last in node, f"replace of missing {operation['path']}"
        node[last] = copy.deepcopy(operation["value"])
    elif op == "remove":
        del node[last]
    elif op == "test":
        assert node.get(last) == operation["value"], f"test failed at {operation['path']}: {node.get(last)!r}"
    else:
        raise AssertionError(f"op {op!r} is not implemented")


def one(documents: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [d for d in documents if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, f"{len(found)} {kind} {name or ''} in the bundle"
    return found[0]
