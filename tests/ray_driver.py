"""The Ray driver watched from inside its process: ``ray_listeners`` (every TCP socket it and its descendants
listen on), ``not_loopback`` (those reachable from another machine) and ``watch_driver_loads`` (every model load
or forward pass it starts)."""

from __future__ import annotations

LOOPBACK = ("127.0.0.1", "[::ffff:127.0.0.1]", "[::1]")


def ray_listeners() -> list[tuple[str, str]]:
    """(local address, process) of every TCP listener of this process and its descendants (Ray's GCS,
    raylets, agents, workers), from ``ss -ltnp``."""
    import re
    import subprocess

    import psutil

    me = psutil.Process()
    pids = {me.pid, *(c.pid for c in me.children(recursive=True))}
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    found = []
    for line in out.splitlines():
        cols = line.split()
        for name, pid in re.findall(r'\("([^"]+)",pid=(\d+)', line):
            if int(pid) in pids:
                found.append((cols[3], name))
    return found


def not_loopback(listeners):
    """The listeners bound to an address other than loopback."""
    return [(a, p) for a, p in listeners if a.rpartition(":")[0] not in LOOPBACK]


def watch_driver_loads(monkeypatch) -> list[str]:
    """Everything in this (the driver's) process that would load a model or run a forward pass, recorded by name
    as it is called: normvar's loader, transformers' ``from_pretrained`` (AutoModel and every model class),
    any ``torch.nn.Module`` built (a model, even on the meta device) and the occurrences' early axes."""
    import torch
    import transformers

    from normvar_core.pipeline import models as M
    from normvar_core.pipeline.measures import occurrences as O
    from normvar_core.pipeline.models import load as L

    seen: list[str] = []

    def spy(name, fn):
        def called(*a, **k):
            seen.append(name)
            return fn(*a, **k)

        return called

    for mod in (M, L):
        monkeypatch.setattr(mod, "load_model", spy("load_model", mod.load_model))
    monkeypatch.setattr(O.AxesPass, "run", spy("early_axes", O.AxesPass.run))
    monkeypatch.setattr(
        transformers.AutoModel, "from_pretrained", spy("AutoModel", transformers.AutoModel.from_pretrained)
    )
    pretrained = transformers.PreTrainedModel.__dict__["from_pretrained"].__func__
    monkeypatch.setattr(
        transformers.PreTrainedModel,
        "from_pretrained",
        classmethod(lambda cls, *a, **k: spy(f"{cls.__name__}.from_pretrained", pretrained)(cls, *a, **k)),
    )
    module_init = torch.nn.Module.__init__
    monkeypatch.setattr(
        torch.nn.Module, "__init__", lambda self, *a, **k: spy(type(self).__name__, module_init)(self, *a, **k)
    )
    return seen
