"""Typed requests and results of every use case, one module per family of use cases.

Every option a use case honours is a field of its request, and every result has one
stable JSON form (``to_dict``), the same for the command line's ``--json`` and the HTTP
service. Field names are the contract: add fields, never rename or drop them.

- :mod:`~.evidence`: which evidence a request may use and under which thresholds
  (``EvidenceFilter``, the default eligibility, threshold overrides and their origin);
- :mod:`~.corpus`: chunks, ingest, status, verify;
- :mod:`~.questions`: search and answer, and the checks of a question's text;
- :mod:`~.evaluation`: evaluate, compare, report (and the ``Dataset`` they read);
- :mod:`~.calibration`: calibrate and clearing the persisted calibration;
- :mod:`~.keys`: the API keys' add, list, revoke.

The public names are exported by :mod:`ragwright.application`.
"""
