from agentkit import sdk


def test_all_matches_public_names():
    public = {n for n in dir(sdk) if not n.startswith("_")}
    assert set(sdk.__all__) == public
    assert len(sdk.__all__) == len(set(sdk.__all__))


def test_required_names_are_exported():
    required = {"Agent", "tool", "Tool", "ModelRetry", "RunResult", "extract", "aextract", "Trace", "IterationRecord",
                "TestModel", "FunctionModel", "HTTPGenerator", "EngineGenerator", "RoutingPolicy", "Limits"}
    assert required <= set(sdk.__all__)


def test_every_public_error_is_exported_from_agentkit():
    import inspect

    import agentkit
    from agentkit import errors

    classes = {n for n, c in inspect.getmembers(errors, inspect.isclass) if issubclass(c, Exception)}
    assert classes <= set(agentkit.__all__)
    assert all(getattr(agentkit, n) is getattr(errors, n) for n in classes)


def test_package_is_typed():
    from pathlib import Path

    import agentkit

    assert (Path(agentkit.__file__).parent / "py.typed").is_file()
