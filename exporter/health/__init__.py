"""The node's own health: links below their capability, fabric configuration drift, engines
starting and warming up, host pauses. Findings, not stages (docs/health.md).

A finding names a device (or an engine) and the figure that makes it one, with the file or
counter it came from. Each kind is one record in exporter/health/kinds/<kind>.py, registered by
itself like a stage: its check, its alert and runbook. The findings are evidence: the stages they
explain quote them (`finding.lines_for`), /diagnosis lists them under the node, each has its alert.

`finding.py` is imported by the stages' inputs (exporter/stages/signals.py), so it imports nothing
of the stages; the records (record.py) and the evaluation (evaluate.py) are imported where used.
"""
