"""Sources: one module per kind of outside data, each behind the `Source` interface of base.py."""
