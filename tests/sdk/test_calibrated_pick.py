"""A calibrated decision picks the tool whose score rises most over the content-free question's; a raw one, the
tool scored highest. The loop adapter declares raw call margins."""

from agentkit.decide import calibrated


def test_the_calibrated_pick_takes_the_question_s_prior_out():
    scores = {"get_weather": -1.0, "calculator": -2.0, "respond": -4.0}
    null = {"get_weather": -1.5, "calculator": -6.0, "respond": -0.5}  # a prior for the first tool listed
    call, info = calibrated(scores, null, ["get_weather", "calculator"], "respond")
    assert call and info["tool"] == "calculator"
    call, info = calibrated(scores, None, ["get_weather", "calculator"], "respond")
    assert call and info["tool"] == "get_weather"


def test_a_raw_margin_still_picks_the_tool_calibrated():
    scores = {"get_weather": -3.0, "calculator": -3.5, "respond": -1.0}
    null = {"get_weather": -3.0, "calculator": -6.0, "respond": -0.1}
    assert calibrated(scores, null, ["get_weather", "calculator"], "respond")[0]  # moved towards the tools: call
    call, info = calibrated(scores, null, ["get_weather", "calculator"], "respond", margin=False)
    assert not call and info["no_call_margin_null"] == 0.0 and info["tool"] == "calculator"
    call, info = calibrated({**scores, "respond": -5.0}, null, ["get_weather", "calculator"], "respond", margin=False)
    assert call and info["tool"] == "calculator"


def test_the_loop_adapter_declares_raw_decisions():
    from agentkit.models.adapter import LOOP_DIR, load_adapter

    assert load_adapter(LOOP_DIR)[1].calibrate is False  # raw margins; typed values and the calibrated pick
