"""The shared tool step (``agentkit/steps/tool_step.py``, ``decision.py``, ``drive.py``) on scripted answers: the
requests it makes, in order, and how each option (the SDK's, the server's) changes the step's ending."""

from __future__ import annotations

import asyncio

import pytest

from agentkit.decide import NULL_QUESTION, logsumexp
from agentkit.engine.stats import DecodeStats, GenerationResult
from agentkit.steps.decision import AfterResult, DecisionAsk, NullScores, Score, decide
from agentkit.steps.drive import drive, drive_async
from agentkit.steps.kinds import OutputError
from agentkit.steps.tool_step import GenerateCall, StepRules, tool_step

SYSTEM = {"role": "system", "content": "tools"}
CHAT = [SYSTEM, {"role": "user", "content": "Weather in Paris?"}]


def result(value=None, text="") -> GenerationResult:
    return GenerationResult(text, [], DecodeStats(mode="ar"), value)


class Script:
    """Answers a step's requests: scores giving no-call margin ``asked`` on the question and ``null`` on the
    baseline ("a" the best tool), the call decode's ``value``, a text reply; records every request."""

    def __init__(self, asked: float = -2.0, null: float = 0.0, value=None) -> None:
        self.asked, self.null, self.value, self.requests = asked, null, value, []

    def __call__(self, request):
        self.requests.append(request)
        if isinstance(request, Score):
            margin = self.null if request.messages[-1]["content"] == NULL_QUESTION else self.asked
            out = {n: (0.0 if n == "a" else -1.0) for n in request.names if n != "respond"}
            if "respond" in request.names:
                out["respond"] = margin + logsumexp(list(out.values()))
            return out
        if isinstance(request, GenerateCall):
            return result(self.value)
        return result(text="It is sunny.")

    def kinds(self) -> list[str]:
        return [type(r).__name__ if not isinstance(r, Score) else "null" if r.messages[-1]["content"] == NULL_QUESTION
                else "score" for r in self.requests]


def ask(**kw) -> DecisionAsk:
    return DecisionAsk(kw.pop("mode", "auto"), CHAT, ["a", "b"], "respond", '{"name": "', **kw)


def server_rules(**kw) -> StepRules:
    """The server's options: lenient reading, grounding in the conversation, the text reply under auto."""
    def read(res):
        value = res.value if isinstance(res.value, list) else [res.value] if res.value else []
        return [(c["name"], c["arguments"]) for c in value if c["name"] in ("a", "b")]
    return StepRules(kw.pop("mode", "auto"), kw.pop("decision", ask()), read, sources=CHAT[-1]["content"],
                     text_reply=True, **kw)


def test_a_call_is_scored_calibrated_then_decoded_under_the_picked_tools_template():
    script = Script(asked=-2.0, value={"name": "a", "arguments": {"city": "Paris"}})
    out = drive(tool_step(server_rules()), script)
    assert script.kinds() == ["score", "null", "GenerateCall"]
    call = script.requests[-1]
    assert call.tool == "a" and call.streamed is False  # under auto it may still turn into a text reply
    assert out.ending == "calls" and out.calls == [("a", {"city": "Paris"})] and not out.text_reply
    assert out.decision.record()["by"] == "calibrated_scores" and out.decision.record()["call"] is True


def test_an_answer_by_the_scores_is_a_text_reply_on_the_server_and_an_ending_for_the_sdk():
    script = Script(asked=1.0)
    out = drive(tool_step(server_rules()), script)
    assert script.kinds() == ["score", "null", "GenerateText"]
    assert out.ending == "decided" and out.text_reply and out.result.text == "It is sunny." and out.choice is None
    sdk = Script(asked=1.0)
    out = drive(tool_step(StepRules("auto", ask(), lambda r: [])), sdk)
    assert sdk.kinds() == ["score", "null"] and out.ending == "decided" and out.result is None


@pytest.mark.parametrize(("value", "ending"), [
    ({"name": "a", "arguments": {"city": "Oslo"}}, "ungrounded"),  # no value from the conversation
    (None, "no_call"),  # the choice decode wrote no call of a tool
])
def test_a_reply_without_a_grounded_call_is_answered_in_text(value, ending):
    script = Script(value=value)
    out = drive(tool_step(server_rules(decision=ask(can_score=False))), script)
    assert script.kinds() == ["GenerateCall", "GenerateText"] and script.requests[0].tool is None
    assert out.ending == ending and out.text_reply and out.calls == [] and out.choice is not None
    assert out.decision.record() == {"by": "choice_decode"}


def test_the_sdks_options_final_answer_repeats_and_an_unusable_reply():
    def strict(res):
        if res.value is None:
            raise OutputError("output is not JSON")
        return [(c["name"], c["arguments"]) for c in res.value]

    earlier = {("a", "1"): "a(1) returned 2"}
    rules = StepRules("auto", None, strict, answer_name="final_answer",
                      earlier=lambda name, args: earlier.get((name, args["x"])))

    def ending(value):
        return drive(tool_step(rules), Script(value=value))

    assert ending([{"name": "final_answer", "arguments": {}}]).ending == "no_call"
    repeat = ending([{"name": "a", "arguments": {"x": "1"}}])
    assert repeat.ending == "repeats" and repeat.repeated == [(("a", {"x": "1"}), "a(1) returned 2")]
    both = ending([{"name": "a", "arguments": {"x": "1"}}, {"name": "a", "arguments": {"x": "2"}}])
    assert both.ending == "calls" and both.calls == [("a", {"x": "2"})] and len(both.read) == 2
    bad = ending(None)
    assert bad.ending == "invalid" and bad.invalid == "output is not JSON"


def test_forced_among_several_tools_picks_the_best_scored_one_and_streams():
    script = Script(value={"name": "a", "arguments": {"city": "Paris"}})
    out = drive(tool_step(server_rules(mode="forced", decision=ask(mode="forced"))), script)
    assert script.kinds() == ["score", "GenerateCall"] and script.requests[0].names == ["a", "b"]
    assert script.requests[1].tool == "a" and script.requests[1].streamed is True
    assert out.decision.record() == {"by": "name_scores", "tool": "a"} and out.calls == [("a", {"city": "Paris"})]
    one = Script(value={"name": "a", "arguments": {}})
    drive(tool_step(server_rules(mode="forced", decision=DecisionAsk("forced", CHAT, ["a"], None, "{"))), one)
    assert one.kinds() == ["GenerateCall"]  # one tool: nothing to decide


def test_the_retry_rule_calls_without_asking_the_decision():
    script = Script(asked=5.0)  # the scores would answer
    decision = drive(decide(ask(retry=True, after=AfterResult((), None, "exclude_moved"))), script)
    assert script.kinds() == ["score"] and script.requests[0].names == ["a", "b"]
    assert decision.call is True and decision.tool == "a"
    assert decision.record() == {"call": True, "by": "retry after a failed tool message", "rule": "retry",
                                 "tool": "a", "scores": {"a": 0.0, "b": -1.0}}


def test_the_null_cache_and_the_rule_after_results():
    null, script = NullScores(), Script()
    for _ in range(2):
        drive(decide(ask(null=null)), script)
    assert script.kinds() == ["score", "null", "score"]  # the baseline scored once
    script = Script()
    after = drive(decide(ask(null=NullScores(), after=AfterResult(("a",), None, "exclude_last"))), script)
    assert script.requests[0].names == ["b", "respond"] and after.info["rule"] == "exclude_last"
    gone = drive(decide(DecisionAsk("auto", CHAT, ["a"], "respond", "{", after=AfterResult(("a",), None,
                                                                                          "exclude_last"))), script)
    assert gone.call is False and gone.info == {"by": "no tool left", "tool": None}


def test_the_sync_and_the_awaited_drivers_agree():
    async def answer(request):
        await asyncio.sleep(0)
        return awaited(request)

    rules = server_rules()
    sync, awaited = Script(value={"name": "a", "arguments": {"city": "Paris"}}), Script(
        value={"name": "a", "arguments": {"city": "Paris"}})
    one = drive(tool_step(rules), sync)
    two = asyncio.run(drive_async(tool_step(rules), answer))
    seen = lambda s: [(type(r), getattr(r, "names", None), getattr(r, "tool", None)) for r in s.requests]
    assert seen(sync) == seen(awaited) and (one.ending, one.calls) == (two.ending, two.calls)


def test_an_error_while_answering_ends_the_step():
    def fails(request):
        raise TimeoutError("cancelled")

    step = tool_step(server_rules())
    with pytest.raises(TimeoutError):
        drive(step, fails)
    assert step.gi_frame is None  # closed
