import socket


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now, for a server a benchmark or a test starts."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
