"""User-chosen destinations (``normvar_core.destination``): a regular file or a free name is written
atomically, and anything else — a symbolic link (to anything, or dangling: never written through), a folder,
a device, a FIFO, a socket, a missing parent — is refused with one line and left exactly as it was (every
link's target is a canary file or folder whose content is checked unchanged).
We run as root, where ``os.replace`` over ``/dev/null`` would turn the device into a file: the
devices here are our own nodes (``os.mknod``, major 1 minor 3 = a null device) in a temp folder,
and ``/dev/null`` itself is only checked to still be a character device afterwards."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

import pytest
from cli_helpers import without_log
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from normvar_core.destination import resolve_destination, write_atomic
from normvar_core.errors import NormvarError
from normvar_core.service import cli

KINDS = (
    "missing",
    "file",
    "folder",
    "fifo",
    "device",
    "socket",
    "missing_parent",
    "link_file",
    "link_dir",
    "link_fifo",
    "link_device",
    "link_dangling",
    "link_dangling_no_dir",
    "link_link_file",
)
REFUSED = {
    "folder",
    "fifo",
    "device",
    "socket",
    "missing_parent",
    "link_dir",
    "link_fifo",
    "link_device",
    "link_dangling_no_dir",
    "link_file",
    "link_link_file",
    "link_dangling",
}


def _device(path: Path) -> Path:
    os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    return path


def make(kind: str, root: Path) -> tuple[Path, Path | None]:
    """Create a destination of ``kind`` under ``root``: (the path given to normvar, the regular file
    that must receive the bytes, or None when it must be refused)."""
    root.mkdir(parents=True, exist_ok=True)
    p = root / "dest.out"
    other = root / "elsewhere"
    other.mkdir()
    if kind == "missing":
        return p, p
    if kind == "file":
        p.write_text("old")
        return p, p
    if kind == "folder":
        p.mkdir()
    elif kind == "fifo":
        os.mkfifo(p)
    elif kind == "device":
        _device(p)
    elif kind == "socket":
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(p))
        s.close()
    elif kind == "missing_parent":
        return root / "no" / "such" / "dest.out", None
    elif kind == "link_file":
        (other / "t.out").write_text("old")
        p.symlink_to(other / "t.out")
    elif kind == "link_link_file":
        (other / "t.out").write_text("old")
        (other / "mid").symlink_to(other / "t.out")
        p.symlink_to(other / "mid")
    elif kind == "link_dir":
        p.symlink_to(other)
    elif kind == "link_fifo":
        os.mkfifo(other / "f")
        p.symlink_to(other / "f")
    elif kind == "link_device":
        p.symlink_to(_device(other / "d"))
    elif kind == "link_dangling":
        p.symlink_to(other / "new.out")
    elif kind == "link_dangling_no_dir":
        p.symlink_to(other / "gone" / "new.out")
    else:
        raise ValueError(kind)
    return p, None


def snapshot(root: Path) -> dict:
    """Every entry under root: (file type bits, link target or file content)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            q = Path(dirpath) / name
            st_ = os.lstat(q)
            what = (
                os.readlink(q) if stat.S_ISLNK(st_.st_mode) else q.read_bytes() if stat.S_ISREG(st_.st_mode) else None
            )
            out[str(q.relative_to(root))] = (stat.S_IFMT(st_.st_mode), what)
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(KINDS), payload=st.binary(min_size=0, max_size=64))
def test_fuzz_destination_kinds(tmp_path_factory, kind, payload):
    """Every kind: refused ones raise one NormvarError and change nothing; accepted ones end as a
    regular file holding the bytes at the right place, links stay links, no temp file is left."""
    root = tmp_path_factory.mktemp("dest")
    given_path, target = make(kind, root)
    before = snapshot(root)
    if target is None:
        assert kind in REFUSED
        with pytest.raises(NormvarError) as err:
            write_atomic(resolve_destination(given_path), lambda tmp: tmp.write_bytes(payload))
        assert "\n" not in str(err.value) and "--out" in str(err.value)
        assert snapshot(root) == before
        return
    assert kind not in REFUSED
    got = write_atomic(resolve_destination(given_path), lambda tmp: tmp.write_bytes(payload))
    assert got == Path(os.path.abspath(target))
    assert stat.S_ISREG(os.lstat(target).st_mode) and target.read_bytes() == payload
    after = snapshot(root)
    for name, (fmt, what) in before.items():  # everything but the target as it was (links untouched)
        if (root / name) != target:
            assert after[name] == (fmt, what), name
    assert not [n for n in after if ".tmp-" in n]


def test_a_write_that_fails_leaves_the_old_file_and_no_temp(tmp_path):
    p = tmp_path / "keep.out"
    p.write_text("old")
    p.chmod(0o640)

    def half(tmp: Path) -> None:
        tmp.write_text("half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_atomic(resolve_destination(p), half)
    assert p.read_text() == "old" and os.listdir(tmp_path) == ["keep.out"]
    write_atomic(resolve_destination(p), lambda tmp: tmp.write_text("new"))
    assert p.read_text() == "new" and stat.S_IMODE(os.stat(p).st_mode) == 0o640  # mode kept


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(KINDS))
def test_fuzz_report_out_through_the_cli(tmp_path_factory, capsys, kind):
    """``normvar report RUN --out PATH`` checks PATH before anything else: a refused kind gives one
    line about --out and exit 2, an accepted one goes on (to the missing run's error); nothing changes."""
    root = tmp_path_factory.mktemp("cli")
    given_path, target = make(kind, root / "t")
    before = snapshot(root / "t")
    code = cli.main(
        ["report", "no-such-run", "--format", "html", "--out", str(given_path), "--data-dir", str(root / "data")]
    )
    err = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert code == 2 and len(err) == 1 and err[0].startswith("normvar: error:"), err
    assert ("--out" in err[0]) == (target is None), err[0]
    assert snapshot(root / "t") == before


def test_report_out_to_dev_null_and_through_a_link(tmp_path, capsys, tiny_run):
    """The real CLI on a real run: /dev/null is refused and stays a character device; a link (to a canary file,
    or dangling) is refused in one line and its target left as it was; a FIFO is refused at once (no write blocks
    on it)."""
    data, name = tiny_run
    code = cli.main(["report", name, "--format", "html", "--out", "/dev/null", "--data-dir", str(data)])
    err = capsys.readouterr().err
    assert code == 2 and "/dev/null is a character device" in err, err
    assert stat.S_ISCHR(os.lstat("/dev/null").st_mode)
    os.mkfifo(tmp_path / "pipe.html")
    assert (
        cli.main(["report", name, "--format", "html", "--out", str(tmp_path / "pipe.html"), "--data-dir", str(data)])
        == 2
    )
    assert "FIFO" in capsys.readouterr().err and stat.S_ISFIFO(os.lstat(tmp_path / "pipe.html").st_mode)
    (tmp_path / "real").mkdir()
    canary = tmp_path / "real" / "canary.html"
    canary.write_text("canary\n")
    for to in (canary, tmp_path / "real" / "r.html"):  # a canary file, and a dangling link
        link = tmp_path / f"link-{to.name}"
        link.symlink_to(to)
        assert cli.main(["report", name, "--format", "html", "--out", str(link), "--data-dir", str(data)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "symbolic link" in err[0] and link.is_symlink(), err
    assert sorted(os.listdir(tmp_path / "real")) == ["canary.html"] and canary.read_text() == "canary\n"


def test_compute_checkpoint_and_run_file_that_are_not_files(tmp_path, capsys, tiny_run, tiny_models):
    """``compute --checkpoint`` on a device or FIFO, and a run name taken by a FIFO or a link in
    ``--out``: one line, exit 2, before any model is loaded; the nodes are left as they were."""
    data, _ = tiny_run
    corpus = data.parent / "c.txt"
    dev = _device(tmp_path / "nul")
    base = ["compute", "--model", str(tiny_models["bert"]), "--corpus", str(corpus), "--data-dir", str(data / "x")]
    assert cli.main(base + ["--name", "a", "--checkpoint", str(dev)]) == 2
    assert "--checkpoint" in capsys.readouterr().err and stat.S_ISCHR(os.lstat(dev).st_mode)
    out = tmp_path / "runs"
    out.mkdir()
    os.mkfifo(out / "b.duckdb")
    (out / "c.duckdb").symlink_to(tmp_path / "nul")
    for name in ("b", "c"):
        assert cli.main(base + ["--name", name, "--out", str(out), "--overwrite"]) == 2
        err = without_log(capsys.readouterr().err)
        assert err.count("\n") == 1 and "not a run" in err, err
    assert stat.S_ISFIFO(os.lstat(out / "b.duckdb").st_mode) and (out / "c.duckdb").is_symlink()
    runs = data / "x" / "runs"
    assert stat.S_ISCHR(os.lstat(dev).st_mode) and (not runs.exists() or not os.listdir(runs))


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory, tiny_models):
    root = tmp_path_factory.mktemp("tinyrun")
    corpus = root / "c.txt"
    corpus.write_text("\n".join(f"the cat {i % 5} sat on the mat number {i % 7} today" for i in range(60)) + "\n")
    data = root / "data"
    assert (
        cli.main(
            [
                "compute",
                "--model",
                str(tiny_models["bert"]),
                "--corpus",
                str(corpus),
                "--name",
                "tiny",
                "--no-geometry",
                "--quiet",
                "--data-dir",
                str(data),
            ]
        )
        == 0
    )
    return data, "tiny"
