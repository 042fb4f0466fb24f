"""Starting or joining Ray for the Ray strategy (``on_ray.py``): fail fast on a dead address, keep a
private Ray on 127.0.0.1. Ray is an optional extra (``requirements-ray.txt``), imported only here
and in ``on_ray.py``."""

from __future__ import annotations

import os

from normvar_core.errors import NormvarError


def _ray():
    try:
        import ray
    except ImportError:
        raise NormvarError(
            "the Ray executor needs Ray", fix="pip install -r requirements-ray.txt (or pip install 'normvar[ray]')"
        ) from None
    return ray


def check_address(address: str, timeout: float = 3.0) -> None:
    """Fail fast (one line) when nothing listens at a ``host:port`` / ``ray://host:port`` address —
    Ray itself retries for minutes before giving up."""
    import socket

    if address in ("auto", "local"):
        return
    hostport = address.split("://", 1)[-1].rstrip("/")
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise NormvarError(
            f"invalid Ray address {address!r}", fix="use HOST:PORT or ray://HOST:PORT (see `ray status`)"
        )
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as exc:
        raise NormvarError(
            f"Ray could not start: nothing answers at {address} ({exc.strerror or exc})",
            fix="check --ray-address (ray status), or drop --executor ray to run in one process",
        ) from None


def preflight(cfg) -> None:
    """What can be checked before the model is loaded: Ray installed, the cluster address answering,
    ``--workers`` within this machine's cores for a private Ray (each actor holds a whole model)."""
    _ray()
    if cfg.ray_address:
        check_address(cfg.ray_address)
    check_local_workers(cfg)


def check_local_workers(cfg) -> None:
    """A private Ray (no ``--ray-address``) runs one actor per core of this machine: no more ``--workers``."""
    if cfg.executor == "ray" and not cfg.ray_address and cfg.workers and cfg.workers > (os.cpu_count() or 1):
        raise NormvarError(
            f"--workers {cfg.workers} is more than this machine's {os.cpu_count() or 1} cores: a local "
            "Ray runs one actor per core, each holding a whole model",
            fix=f"use --workers {os.cpu_count() or 1} or less (or --ray-address of a larger cluster)",
        )


def check_workers(ray, workers: int, gpus: int) -> None:
    """Each actor takes ``gpus`` GPUs (``--gpus-per-worker``; one by default where there are GPUs) or one core:
    more actors than the cluster can hold would wait forever."""
    what, each = ("GPU", int(gpus)) if gpus else ("CPU", 1)
    have = int(ray.cluster_resources().get(what, 0))
    if workers * each > have:
        raise NormvarError(
            f"--workers {workers} is more than the Ray cluster's {have} {what}s hold: each actor takes "
            f"{each} and the rest would wait forever",
            fix=f"use --workers {have // each} or less",
        )


LOOPBACK_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


def loopback_only(ray) -> None:
    """Keep a Ray started from this process on 127.0.0.1. Ray replaces a loopback node address by the
    machine's own (``services.resolve_ip_for_localhost``) unless its cluster mode is off
    (``ray_constants.ENABLE_RAY_CLUSTER``, read from ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER`` at import):
    off, with node address 127.0.0.1, the GCS, raylets, agents and workers listen on loopback only.
    The environment variable reaches the processes Ray starts; the constant, this one."""
    os.environ[LOOPBACK_ENV] = "0"
    ray._private.ray_constants.ENABLE_RAY_CLUSTER = False


def quiet_driver(ray) -> None:
    """No raw Ray line on this process's terminal: the driver's ``ray`` logger at CRITICAL (``ray.init``'s
    ``logging_level``: no "Started a local Ray instance", no token-authentication warning) and the raylet's
    error messages, which Ray's driver prints on stdout ("(raylet) Task ... failed"), not echoed
    (``_worker_logs_enabled``, the switch Ray itself turns off at a breakpoint). Everything stays in the
    session's log files (``/tmp/ray/session_*/logs``); a failure reaches the user as normvar's own line."""
    worker = getattr(getattr(ray, "_private", None), "worker", None)
    if worker is not None and hasattr(worker, "_worker_logs_enabled"):
        worker._worker_logs_enabled = False


def start_ray(address: str | None, workers: int):
    import logging

    ray = _ray()
    if ray.is_initialized():
        return ray
    if address:
        check_address(address)
    quiet = dict(log_to_driver=False, include_dashboard=False, logging_level=logging.CRITICAL)
    try:
        if address:
            ray.init(address=address, ignore_reinit_error=True, **quiet)
        else:  # a private Ray: never attach to a cluster named by a leftover /tmp/ray session file
            loopback_only(ray)
            ray.init(
                address="local",
                num_cpus=max(workers, 1),
                ignore_reinit_error=True,
                _node_ip_address="127.0.0.1",
                **quiet,
            )
        quiet_driver(ray)
    except Exception as exc:
        first = (str(exc).splitlines() or [type(exc).__name__])[0][:200]
        raise NormvarError(
            f"Ray could not start{f' at {address}' if address else ''}: {first}",
            fix="check --ray-address (ray status), or drop --executor ray to run in one process",
        ) from None
    return ray


__all__ = [
    "check_address",
    "preflight",
    "check_workers",
    "check_local_workers",
    "quiet_driver",
    "loopback_only",
    "start_ray",
    "LOOPBACK_ENV",
]
