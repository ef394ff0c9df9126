import json

from inferlab.records import STAGES, GenerationResult, StageTiming


def make_result() -> GenerationResult:
    timings = [StageTiming("request_parse", 0.001), StageTiming("forward_pass", 0.2, 0),
               StageTiming("sample", 0.01, 0), StageTiming("forward_pass", 0.3, 1),
               StageTiming("sample", 0.02, 1), StageTiming("decode", 0.004)]
    return GenerationResult("hi", [1], [2, 3], ["a", "b"], "ab", timings, ["kv_cache"], {"k": 1})


def test_stage_totals_sum_steps_in_first_seen_order():
    totals = make_result().stage_totals()
    assert list(totals) == ["request_parse", "forward_pass", "sample", "decode"]
    assert abs(totals["forward_pass"] - 0.5) < 1e-12
    assert abs(totals["sample"] - 0.03) < 1e-12


def test_total_and_step_seconds():
    result = make_result()
    assert abs(result.total_seconds() - 0.535) < 1e-12
    assert result.step_seconds() == [0.2, 0.3]
    assert result.step_seconds("sample") == [0.01, 0.02]


def test_json_round_trip_keeps_everything():
    result = make_result()
    data = json.loads(result.to_json())
    assert data["timings"][1] == {"stage": "forward_pass", "seconds": 0.2, "step": 0}
    assert data["simulated_stages"] == ["kv_cache"]
    rebuilt = GenerationResult(**{**data, "timings": [StageTiming(**t) for t in data["timings"]]})
    assert rebuilt == result


def test_stage_names_are_the_seven_of_chapter_1():
    assert STAGES == ("request_parse", "tokenize", "encode", "forward_pass", "sample", "decode",
                      "response_format")
