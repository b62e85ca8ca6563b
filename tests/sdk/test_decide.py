"""The tool step's decision by scores (``agentkit/sdk/_decide.py``) on a scripted scorer: the calibration, the
rules after a tool result, and the agent loop with a scorer (the answer step carries the decision)."""

from __future__ import annotations

import pytest

from agentkit.errors import UserError
from agentkit.sdk import Agent, FunctionModel, TestModel, tool
from agentkit.sdk import _decide as d

SYSTEM = {"role": "system", "content": "tools"}


class Scripted:
    """A NameScorer whose scores come from ``table(messages, names)``; records each call."""

    can_score = True

    def __init__(self, table):
        self.table, self.calls = table, []

    async def name_scores(self, messages, names, head):
        self.calls.append((messages[-1]["content"], tuple(names), head))
        return self.table(messages, names)


def margins(asked: float, null: float, tools=("a", "b")):
    """Scores giving no-call margin ``asked`` on the question and ``null`` on the baseline ("a" the best tool)."""
    def table(messages, names):
        m = null if messages[-1]["content"] == "N/A" else asked
        out = {n: (0.0 if n == "a" else -1.0) for n in names if n != "final_answer"}
        from agentkit.decide import logsumexp
        out["final_answer"] = m + logsumexp(list(out.values()))
        return out
    return table


@pytest.mark.parametrize("asked,null,call", [(-2.0, 0.0, True), (1.0, 0.0, False), (0.0, 0.0, True)])
async def test_first_step_is_calibrated_against_the_null_question(asked, null, call):
    scorer = Scripted(margins(asked, null))
    got = await d.decide_step(scorer, [SYSTEM, {"role": "user", "content": "q"}], ["a", "b"], None, d.NullScores())
    assert (got.tool is not None) is call and got.info["rule"] == "null"
    assert got.tool in (None, "a") and scorer.calls[0][2] == '{"name": "'


async def test_exclude_last_drops_the_tool_that_just_returned():
    scorer = Scripted(margins(-2.0, 0.0))
    chat = [SYSTEM, {"role": "user", "content": "q"}]
    got = await d.decide_step(scorer, chat, ["a", "b"], None, d.NullScores(), done=("a",), rule="exclude_last")
    assert got.tool == "b" and scorer.calls[0][1] == ("b", "final_answer")
    only = await d.decide_step(scorer, chat, ["a"], None, d.NullScores(), done=("a",), rule="exclude_last")
    assert only.tool is None and only.info["by"] == "no tool left" and len(scorer.calls) == 2  # nothing scored


async def test_moved_calls_again_only_when_the_result_moved_towards_the_tools():
    chat = [SYSTEM, {"role": "user", "content": "q"}]
    first = await d.decide_step(Scripted(margins(-3.0, 0.0)), chat, ["a"], None, d.NullScores())
    for after, call in [(-2.0, False), (-4.0, True)]:
        got = await d.decide_step(Scripted(margins(after, 0.0)), chat, ["a"], None, d.NullScores(), done=("a",),
                                  previous=first, rule="moved")
        assert (got.tool is not None) is call and got.info["previous_margin"] == -3.0


async def test_the_baseline_is_scored_once_per_option_set():
    scorer, null = Scripted(margins(-2.0, 0.0)), d.NullScores()
    chat = [SYSTEM, {"role": "user", "content": "q"}]
    for _ in range(3):
        await d.decide_step(scorer, chat, ["a", "b"], None, null)
    assert [c[0] for c in scorer.calls].count("N/A") == 1


def test_decide_is_checked_and_fakes_decode():
    with pytest.raises(UserError, match="decide must be one of"):
        Agent(FunctionModel(lambda m, i: "x"), decide="vote")
    assert Agent(FunctionModel(lambda m, i: "x"))._scorer is None  # a fake cannot score: the choice is decoded


@tool
def double(x: int) -> int:
    """Double x."""
    return 2 * x


class ScoringModel(FunctionModel):
    """A FunctionModel that can score: calls ``double`` first, then its scores say answer."""

    can_score = True

    async def name_scores(self, messages, names, head):
        answered = any(m["content"].startswith("Tool double returned") for m in messages)
        return {n: (-9.0 if n == "final_answer" and not answered else 0.0) for n in names}


async def test_agent_with_a_scorer_calls_then_answers_in_two_iterations():
    steps = []

    def fn(messages, info):
        steps.append((info.step, info.template.meta.get("tools") if info.template is not None else None))
        return {"name": "double", "arguments": {"x": 21}} if info.step == "tool_call" else "It is 42."

    result = await Agent(ScoringModel(fn), tools=[double]).run("Double 21")
    assert result.output == "It is 42."
    assert [(r.step, r.tool) for r in result.trace] == [("tool_call", "double"), ("reply", None)]
    assert result.trace[0].decision["call"] and result.trace[1].decision == {  # 21 was taken: the request is served
        "call": False, "by": "every value of the request was taken", "tool": None}
    assert steps[0][1] == {"double": double.call_schema}  # only the picked tool's template: no final_answer option


async def test_the_decision_scores_the_conversation_without_the_plan():
    seen = []

    class Recording(ScoringModel):
        async def name_scores(self, messages, names, head):
            seen.append([m["content"] for m in messages])
            return await super().name_scores(messages, names, head)

    def fn(messages, info):
        if info.step == "plan":
            return {"steps": ["answer from memory"]}
        return {"name": "double", "arguments": {"x": 21}} if info.step == "tool_call" else "It is 42."

    result = await Agent(Recording(fn), tools=[double], plan=True).run("Double 21")
    assert [(r.step, r.tool) for r in result.trace] == [("plan", None), ("tool_call", "double"), ("reply", None)]
    plan_turn = [m.parts[0].content for m in result.all_messages()[1:3]]  # the plan's answer and "Carry out the plan."
    assert "Carry out the plan." in plan_turn
    assert seen and not any(t in s for s in seen for t in plan_turn)  # in the call's and reply's view, not here


@pytest.mark.parametrize("decision, call", [("choice", "choice_example"), ("shared", "choice_example"),
                                            ("choice", "tool_step"), ("choice", "choice")])
async def test_a_chosen_call_is_decoded_on_a_prompt_that_starts_as_the_decisions(monkeypatch, decision, call):
    monkeypatch.setattr(d, "DECISION_PROMPT", decision)
    monkeypatch.setattr(d, "CALL_PROMPT", call)
    scored, decoded = [], []

    class Recording(ScoringModel):
        async def name_scores(self, messages, names, head):
            scored.append(messages)
            return await super().name_scores(messages, names, head)

    def fn(messages, info):
        decoded.append((info.step, messages))
        return {"name": "double", "arguments": {"x": 21}} if info.step == "tool_call" else "It is 42."

    result = await Agent(Recording(fn), tools=[double]).run("Double 21")
    assert result.output == "It is 42."
    call_chat = next(m for step, m in decoded if step == "tool_call")
    decided, called = scored[0][0]["content"], call_chat[0]["content"]
    assert '"respond"' in decided and ("For example" in decided) == (decision == "shared")
    assert call_chat[1:] == scored[0][1:]  # the same conversation after the system message
    if call == "tool_step":  # the tool step's own system prompt (final_answer to stop)
        assert not called.startswith(decided) and "final_answer" in called
    elif call == "choice":  # the decision's own messages: the prefix cache holds all of them
        assert call_chat == scored[0]
    else:  # the decision's text, then the worked example: the prefix cache holds the pieces they share
        assert called.startswith(decided) and "For example" in called


def test_null_scores_keep_the_most_recent_entries():
    null = d.NullScores(size=2)
    for i in range(3):
        null.put(("s", (str(i),)), {"x": float(i)})
    assert null.get(("s", ("0",))) is None and null.get(("s", ("2",))) == {"x": 2.0} and len(null.by_key) == 2


async def test_an_agents_after_result_rule_reaches_the_decision():
    """``Agent(after_result=...)`` is the rule after a tool result (checked at construction)."""
    with pytest.raises(UserError, match="after_result must be one of"):
        Agent(FunctionModel(lambda m, i: "x"), after_result="always")

    def fn(messages, info):
        return {"name": "double", "arguments": {"x": 21}} if info.step == "tool_call" else "It is 42."

    @tool
    def halve(x: int) -> int:
        """Halve x."""
        return x // 2

    for rule, expected in (("exclude_last", "exclude_last"), (None, d.AFTER_RESULT)):
        result = await Agent(ScoringModel(fn), tools=[double, halve], after_result=rule,  # not served first
                             model_settings={"grounded_arguments": False}).run("Double 21")
        assert result.trace[1].decision["rule"] == expected


async def test_after_a_failed_call_the_step_retries_unless_told_to_decide():
    """``after_failure="retry"`` (default): after a ``ModelRetry`` the next step is a call (the scores pick the tool,
    ``final_answer`` is no option) while the tool has retries left; ``"decide"``: the scores may answer instead."""
    from agentkit import ModelRetry, UnexpectedModelBehavior

    with pytest.raises(UserError, match="after_failure must be one of"):
        Agent(FunctionModel(lambda m, i: "x"), after_failure="never")
    attempts = []

    @tool
    def flaky(x: int) -> int:
        """Fails on its first call."""
        attempts.append(x)
        if len(attempts) == 1:
            raise ModelRetry("busy, try again")
        return x

    class AnswersAfterAnyReply(FunctionModel):
        can_score = True

        async def name_scores(self, messages, names, head):  # answers as soon as the conversation holds a reply
            replied = any("busy" in m["content"] for m in messages)
            return {n: (0.0 if (n not in ("flaky", "broken")) == replied else -9.0) for n in names}  # no-call

    def fn(messages, info):
        return {"name": "flaky", "arguments": {"x": 7}} if info.step == "tool_call" else "It is 7."

    result = await Agent(AnswersAfterAnyReply(fn), tools=[flaky]).run("Seven")
    assert [(r.step, r.tool, r.error is None) for r in result.trace] == [
        ("tool_call", "flaky", False), ("tool_call", "flaky", True), ("reply", None, True)]
    assert result.trace[1].decision["rule"] == "retry" and attempts == [7, 7]
    attempts.clear()
    result = await Agent(AnswersAfterAnyReply(fn), tools=[flaky], after_failure="decide").run("Seven")
    assert [(r.step, r.tool) for r in result.trace] == [("tool_call", "flaky"), ("reply", None)] and attempts == [7]

    @tool(retries=0)
    def broken(x: int) -> int:
        """Always fails."""
        raise ModelRetry("no")

    def fn2(messages, info):
        return {"name": "broken", "arguments": {"x": 1}} if info.step == "tool_call" else "?"

    with pytest.raises(UnexpectedModelBehavior, match="failed 1 time"):  # no retries left: pydantic-ai's error
        await Agent(AnswersAfterAnyReply(fn2), tools=[broken]).run("One")


class RecordingScorer(ScoringModel):
    """Scores as ScoringModel and records the questions it was asked to score."""

    def __init__(self, fn, calibrate=None):
        super().__init__(fn)
        self.asked = []
        if calibrate is not None:
            self.calibrate = calibrate

    async def name_scores(self, messages, names, head):
        self.asked.append(messages[-1]["content"])
        return await super().name_scores(messages, names, head)


async def test_weights_trained_on_the_decisions_decide_without_the_null_question():
    from agentkit.decide import NULL_QUESTION

    def fn(messages, info):
        return {"name": "double", "arguments": {"x": 21}} if info.step == "tool_call" else "It is 42."

    calibrated, raw = RecordingScorer(fn), RecordingScorer(fn, calibrate=False)
    for scorer in (calibrated, raw):
        result = await Agent(scorer, tools=[double]).run("Double 21")
        assert result.output == "It is 42." and result.trace[0].tool == "double"
    assert NULL_QUESTION in calibrated.asked and NULL_QUESTION not in raw.asked
    assert result.trace[0].decision["no_call_margin_null"] == 0.0  # the raw margin decided
    assert Agent(raw, tools=[double]).after_result == "null"  # the rule its training traces were made with
    assert Agent(raw, tools=[double], after_result="exclude_last").after_result == "exclude_last"
    assert Agent(calibrated, tools=[double]).after_result is None  # _decide.AFTER_RESULT


@pytest.mark.parametrize(("declared", "asked", "null_asked"), [(False, True, True), (True, False, False),
                                                                (False, None, False), (True, None, True)])
async def test_the_agent_can_override_what_the_weights_declare(declared, asked, null_asked):
    """``Agent(calibrate=...)`` decides whether the scores are read against the null question; None: the weights'
    declaration (the coding assistant sets True, so the loop adapter's raw decisions do not end its workflow)."""
    from agentkit.decide import NULL_QUESTION

    def fn(messages, info):
        return {"name": "double", "arguments": {"x": 21}} if info.step == "tool_call" else "It is 42."

    scorer = RecordingScorer(fn, calibrate=declared)
    agent = Agent(scorer, tools=[double], calibrate=asked)
    result = await agent.run("Double 21")
    assert result.output == "It is 42."
    assert (NULL_QUESTION in scorer.asked) is null_asked
    assert (agent.after_result == "null") is (not null_asked)  # the raw rule goes with raw decisions


def test_calibrate_must_be_a_bool_or_none():
    with pytest.raises(UserError, match="calibrate"):
        Agent(TestModel(), calibrate="yes")


def test_calibrates_reads_the_merged_lora_declaration():
    from types import SimpleNamespace

    from agentkit.decide import calibrated, calibrates

    assert calibrates(SimpleNamespace(lm=SimpleNamespace(meta={})))
    assert calibrates(SimpleNamespace(lm=SimpleNamespace(meta={"lora_config": {"calibrate": True}})))
    assert not calibrates(SimpleNamespace(lm=SimpleNamespace(meta={"lora_config": {"calibrate": False}})))
    scores, null = {"t": -1.0, "respond": -0.5}, {"t": -3.0, "respond": -0.1}
    assert calibrated(scores, null, ["t"], "respond")[0]  # the request moved towards the tool: call
    assert not calibrated(scores, None, ["t"], "respond")[0]  # raw: "respond" is likelier, answer


async def test_a_tool_whose_values_the_task_lacks_is_no_option_and_the_call_is_grounded():
    """``grounded_arguments`` (default on): ``double`` needs a number, so on a task that writes none the scores are
    not asked about it and the run answers; on "Double 21" the call's ``x`` can only be 21 (a choice, no slot)."""
    asked, templates = [], []

    class Recording(ScoringModel):
        async def name_scores(self, messages, names, head):
            asked.append(tuple(names))
            return await super().name_scores(messages, names, head)

    def fn(messages, info):
        templates.append(info.template)
        return {"name": "double", "arguments": {"x": 21}} if info.step == "tool_call" else "Sure."

    result = await Agent(Recording(fn), tools=[double]).run("Double my favourite number")
    assert result.output == "Sure." and [r.step for r in result.trace] == ["reply"] and asked == []
    assert result.trace[0].decision["by"] == "no tool has its values"
    result = await Agent(Recording(fn), tools=[double]).run("Double 21")
    call = templates[1]
    assert call.meta["step"] == "tool_call" and "Lit(text='21')" in str(call.root) and "Slot" not in str(call.root)
    off = Agent(Recording(fn), tools=[double], model_settings={"grounded_arguments": False})
    assert (await off.run("Double my favourite number")).trace[0].tool == "double"


@pytest.mark.parametrize("instructions", [None, "Be brief."])
def test_a_listed_first_decision_opens_as_the_tool_steps_prompt(monkeypatch, instructions):
    """``DECISION_PROMPT = "listed_first"``: the decision's system text is the tool step's own up to the end of the
    tools' list (so the call's prompt pass reuses its blocks), then the choice prompt's format and no-call option."""
    from agentkit.steps.kinds import system_prompt
    from agentkit.toolcall import tools_list

    monkeypatch.setattr(d, "DECISION_PROMPT", "listed_first")
    chat = [{"role": "system", "content": "ignored"}, {"role": "user", "content": "Double 21"}]
    decided, no_call = d.decision_chat(chat, instructions, [double])
    text, step = decided[0]["content"], system_prompt(instructions, [double])
    opening = f"{instructions or 'You are a helpful assistant.'}\n\n{tools_list([double.spec])}\n\n"
    assert text.startswith(opening) and step.startswith(opening) and text != step
    assert no_call == "respond" and '"respond"' in text and "final_answer" not in text
    assert decided[1:] == chat[1:]
