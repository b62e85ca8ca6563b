from agentkit import sdk


def test_all_matches_public_names():
    public = {n for n in dir(sdk) if not n.startswith("_")}
    assert set(sdk.__all__) == public
    assert len(sdk.__all__) == len(set(sdk.__all__))


def test_required_names_are_exported():
    required = {"Agent", "tool", "Tool", "ModelRetry", "RunResult", "extract", "aextract", "Trace", "IterationRecord",
                "TestModel", "FunctionModel", "HTTPGenerator", "EngineGenerator", "RoutingPolicy", "Limits"}
    assert required <= set(sdk.__all__)
