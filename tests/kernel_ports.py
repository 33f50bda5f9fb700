"""Kernels started by the tests take their TCP ports below the ephemeral range.

jupyter_client picks a kernel's five ports by binding port 0 and letting go; the kernel binds
them a second or more later (jupyter_client issue 487). With pytest-xdist, the other worker's
servers (bound to port 0) and client connections take ports from that same ephemeral range
meanwhile, and a kernel that finds one of its ports taken dies at start ("Address already in
use", then "Kernel didn't respond in 60 seconds"). A port drawn at random below the ephemeral
range is never handed out by the system, so only another kernel could take it, one chance in
thousands. Used by ``tests/conftest.py`` in the test processes, and as a pytest plugin
(``-p tests.kernel_ports``) by the nbval run of the notebooks. JupyterLab's own kernels (the
browser tier) are restarted on new ports by its kernel restarter if that ever happens.
"""

from __future__ import annotations

import random
import socket
from typing import Any

#: Below Linux's default ephemeral range (32768-60999) and above the registered services.
LOW, HIGH = 20_000, 32_767


def kernel_ports_below_the_ephemeral_range() -> None:
    """Make ``jupyter_client`` draw the ports of every kernel started in this process from
    ``LOW``..``HIGH`` (a free one, not given to another kernel of this process)."""
    from jupyter_client.connect import LocalPortCache

    def find_available_port(self: Any, ip: str) -> int:
        while True:
            port = random.randint(LOW, HIGH)
            if port in self.currently_used_ports:
                continue
            with socket.socket() as probe:
                try:
                    probe.bind((ip, port))
                except OSError:
                    continue
            self.currently_used_ports.add(port)
            return port

    LocalPortCache.find_available_port = find_available_port


def pytest_configure(config: Any) -> None:  # (no pytest import: Binder's test runs this too)
    kernel_ports_below_the_ephemeral_range()
