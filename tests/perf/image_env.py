"""The environment the image sets for the exporter's process (Dockerfile, its last stage's `ENV`)
that changes what the perf scripts measure: they run the exporter with it, so they measure the
memory users run, not a default the image changes. tests/unit/test_k8s_manifests.py keeps the two
the same."""

#: glibc's malloc arenas: two, not eight per core (docs/performance.md, the soak)
IMAGE_ENV = {"MALLOC_ARENA_MAX": "2"}
