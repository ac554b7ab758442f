"""Finding engine targets at run time, where they come and go (Kubernetes pods on this node).

A discovery keeps a `DynamicEngineSources` (targets.py) up to date; the collection loop asks it for
its current sources every round, so a pod that appears is scraped from the next round on and one
that is deleted stops being scraped, with its series, at once.
"""

from __future__ import annotations

from dataclasses import dataclass

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


@dataclass(frozen=True)
class KubernetesSettings:
    """The `kubernetes:` section of the configuration (docs/deployment.md, "Let the exporter find your engines")."""

    enabled: bool = False
    #: this node's name; None means the NODE_NAME environment variable (set from spec.nodeName)
    node_name: str | None = None
    #: the API server; None means in-cluster: https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT
    api_url: str | None = None
    token_file: str = f"{SERVICE_ACCOUNT_DIR}/token"
    ca_file: str = f"{SERVICE_ACCOUNT_DIR}/ca.crt"
    #: a full list at least this often, besides the watch, so a missed event cannot last
    resync_seconds: float = 300.0
    #: the most pods scraped at once (annotations are written by whoever deploys pods)
    max_engines: int = 32
    # Scrape limits of each discovered engine, from `engine_defaults`.
    timeout_seconds: float = 2.0
    max_response_bytes: int = 16 * 1024 * 1024
    max_series: int = 10_000
    max_label_value_length: int = 1024
