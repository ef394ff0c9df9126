"""The "Your run" box (inferbook.your_run): published claims are asserted only when publishing, and reported otherwise."""
import json

import pytest

from inferbook.your_run import YourRun, machine_words, published_record

AMD = {"processor": "AMD EPYC", "cpu_family": "25", "cpu_model": "17"}
INTEL = {"processor": "Intel(R) Xeon(R) Processor", "cpu_family": "6", "cpu_model": "207"}


def test_a_claim_that_fails_on_a_readers_run_is_reported_not_raised(monkeypatch):
    monkeypatch.delenv("INFERLAB_RECORD", raising=False)
    run = YourRun("Experiment 2", {"provenance": {"machine": AMD}}, INTEL)
    assert run.claim("two threads buy at least 1.9x", False) is None  # nothing to print under a hidden cell
    run.claim("the long pass is slower", True)
    run.number("speed-up", 1.71234, 2.0, ".2f")
    run.number("slope", 0.5, None, ".1f")
    assert run.held() == [False, True]
    page = run.html()
    assert "did not hold: two threads buy at least 1.9x" in page and "held: the long pass is slower" in page
    assert "<td>1.71</td><td>2.00</td>" in page and "not recorded" in page
    assert "This run: Intel(R) Xeon(R) Processor (family 6, model 207)" in page and "AMD EPYC (family 25" in page


def test_when_publishing_a_claim_is_asserted_and_this_run_is_the_published_one(monkeypatch):
    monkeypatch.setenv("INFERLAB_RECORD", "1")
    run = YourRun("Experiment 2", {"provenance": {"machine": AMD}}, INTEL)
    with pytest.raises(AssertionError, match="two threads"):
        run.claim("two threads buy at least 1.9x", False)
    assert run.report("the compiled path was faster", False) is False  # a reported verdict is never asserted
    run.number("speed-up", 1.5, 2.0, ".1f")
    assert "<td>1.5</td><td>1.5</td>" in run.html() and "AMD" not in run.html()


def test_the_published_record_is_read_from_data(tmp_path):
    (tmp_path / "ch99.json").write_text(json.dumps({"provenance": {"machine": AMD}}))
    assert published_record("ch99", tmp_path)["provenance"]["machine"] == AMD
    assert published_record("ch98", tmp_path) is None
    assert machine_words(None) == "an unrecorded machine"
