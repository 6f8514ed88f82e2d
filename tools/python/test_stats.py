"""Stats through groser-client against a real groserd: `stats --prometheus`
must be the Prometheus text format (parsed here with prometheus_client's own
parser), with the counters the requests made; `stats --json` the same
figures. Run through tools/python-client-test."""
from __future__ import annotations

import json
import os
import subprocess

import pytest
from prometheus_client.parser import text_string_to_metric_families

from groserd_harness import Daemon, StatusCode, get_store

CLIENT = os.path.join(os.path.dirname(os.environ.get("GROSERD", "")), "groser-client")


@pytest.fixture(scope="module")
def daemon():
    d = Daemon("--threads", "2")
    try:
        yield d
    finally:
        d.cleanup()


def run_client(d: Daemon, *args: str) -> str:
    r = subprocess.run([CLIENT, "--socket", d.socket, *args], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_stats_prometheus_parses_and_counts_requests(daemon):
    with daemon.client() as c:
        for _ in range(5):
            c.get_store(city_code="SPB")
        with pytest.raises(Exception):
            c.get_store(city_code="NOPE")
    text = run_client(daemon, "stats", "--prometheus")
    families = {f.name: f for f in text_string_to_metric_families(text)}
    # prometheus_client names counters without their _total suffix.
    requests = {s.labels["method"]: s.value for s in families["groserd_requests"].samples
                if s.name == "groserd_requests_total"}
    assert requests["GetStore"] >= 6
    errors = {s.labels["method"]: s.value for s in families["groserd_request_errors"].samples
              if s.name == "groserd_request_errors_total"}
    assert errors["GetStore"] >= 1
    by_code = {s.labels["code"]: s.value for s in families["groserd_responses_by_status"].samples}
    assert by_code["NOT_FOUND"] >= 1
    durations = families["groserd_request_duration_seconds"]
    assert durations.type == "summary"
    quantiles = [s for s in durations.samples if s.labels.get("method") == "GetStore" and "quantile" in s.labels]
    assert {s.labels["quantile"] for s in quantiles} == {"0.5", "0.9", "0.99", "0.999"}
    assert all(0 <= s.value < 1 for s in quantiles)
    count = [s.value for s in durations.samples if s.name.endswith("_count") and s.labels.get("method") == "GetStore"]
    assert count and count[0] >= 6
    assert families["groserd_catalog_products"].samples[0].value > 100
    assert families["groserd_resident_memory_bytes"].samples[0].value > 1_000_000
    assert families["groserd_connections"].type == "gauge"


def test_stats_json_has_the_same_figures(daemon):
    data = json.loads(run_client(daemon, "--json", "stats"))
    methods = {m["method"]: m for m in data["methods"]}
    assert int(methods["GetStore"]["requests"]) >= 1
    assert int(data["catalogStores"]) >= 2
    assert data["serverVersion"].startswith("groserd ")
