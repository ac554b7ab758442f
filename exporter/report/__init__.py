"""Case review: a before/after diagnosis report over time windows, read from Prometheus.

`report --baseline A/B --incident C/D [--after E/F]` answers "what changed between these windows,
and did the fix work" where the exporter itself answers "what is the bottleneck now":

- windows.py: START/END parsing (RFC 3339, Unix seconds, relative);
- timing.py: each window's data and scrape interval, the step and rate range, and where each
  figure is read so its look-back stays inside its window;
- extra.py: whether the report's own libraries are installed (imports none of them);
- prometheus.py: the HTTP API client (bounded fetches, Prometheus' own auth and TLS options);
- queries.py: each figure's PromQL, from the generated recording rules and the catalogue;
- stats.py, matrix.py: window means, changes, the Mann-Whitney U test with sample counts;
- walk.py, causes.py, fix.py: the stage walk, the causes, the fix verdict;
- build.py: the queries run and the report assembled;
- render_json.py, plots.py, present.py, render_pages.py (+ templates/): the outputs.
"""
