"""A run its memory plan says will not fit, even after dropping what may be dropped, is refused before its pass:
``normvar compute`` exits 2 with one line that gives the plan's figure and its fixes, and leaves no run file and no
checkpoint; the same options with room enough run."""

from __future__ import annotations

from cli_helpers import run_cli

from normvar_core.runs.reader import open_run


def test_a_run_that_will_not_fit_is_refused_before_the_pass(capsys, tmp_path, tiny_models, corpus40):
    base = ["compute", "--model", tiny_models["bert"], "--corpus", corpus40, "--data-dir", tmp_path, "--name", "r"]
    code, out, err = run_cli(capsys, *base, "--memory-gb", "0.01")  # 10 MiB: not even the runtime fits
    lines = [x for x in err.splitlines() if x.strip()]
    assert code == 2 and out == "", err
    assert len(lines) == 1 and "would not fit in memory" in lines[0] and "of 0.0 GiB" in lines[0], lines
    assert " — " in lines[0] and "--" in lines[0].split(" — ", 1)[1]  # the plan's fixes, options named, same line
    assert not (tmp_path / "runs" / "r.duckdb").exists() and not list((tmp_path / "checkpoints").glob("*.ckpt"))
    code, out, err = run_cli(capsys, *base, "--memory-gb", "1000")
    assert code == 0, err
    assert open_run(out.strip()).meta["notes"]["memory"]["fits"] is True
