"""``agentkit serve`` checks its address before loading the model (``serving/cli.check_address``)."""

import socket

import pytest
from agentkit.serving.cli import check_address

from agentkit.errors import InvalidRequestError


def test_a_bad_port_or_a_busy_one_is_refused_before_the_model_loads():
    for bad in (0, 70000, "8000", True):
        with pytest.raises(InvalidRequestError, match="port must be an integer in 1..65535"):
            check_address("127.0.0.1", bad)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(InvalidRequestError, match=f"cannot serve on 127.0.0.1:{port}"):
            check_address("127.0.0.1", port)
    check_address("127.0.0.1", port)  # free again


def test_an_unknown_host_is_refused():
    with pytest.raises(InvalidRequestError, match="cannot be resolved"):
        check_address("no-such-host.invalid", 8000)
