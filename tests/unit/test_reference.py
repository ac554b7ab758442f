from exporter.reference import metrics_reference
from tests.support import REPO


def test_metrics_reference_is_current() -> None:
    committed = (REPO / "docs" / "metrics.md").read_text(encoding="utf-8")
    assert committed == metrics_reference(), (
        "docs/metrics.md is stale: run python -m exporter.reference > docs/metrics.md"
    )


def test_every_catalogue_family_is_in_the_reference() -> None:
    from exporter.catalogue import CATALOGUE

    text = metrics_reference()
    assert all(f"`{name}`" in text for name in CATALOGUE)
