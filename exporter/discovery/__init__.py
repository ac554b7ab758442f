"""Finding engine targets at run time, where they come and go (Kubernetes pods on this node).

A discovery keeps a `DynamicEngineSources` (targets.py) up to date; the collection loop asks it for
its current sources every round, so a pod that appears is scraped from the next round on and one
that is deleted stops being scraped, with its series, at once.
"""

from exporter.settings import KubernetesSettings

__all__ = ["KubernetesSettings"]
