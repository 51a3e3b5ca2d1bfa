"""Results directories as single tarballs, and back.

A GPU call returns only a few files, so ``ncudnn bench --pack`` (and ``tools/bench_pack.sh``) makes one
``.tgz`` of a results directory (results.json, report.md, charts, overhead JSON, logs); ``--merge`` and
``--report`` accept such tarballs wherever they take a directory.
"""
import tarfile
import tempfile
from pathlib import Path

SUFFIXES = (".tgz", ".tar.gz", ".tar")


def is_tarball(path):
    return str(path).endswith(SUFFIXES) and Path(path).is_file()


def pack(out_dir, tgz=None):
    """``out_dir`` into ``tgz`` (default ``<out_dir>.tgz`` beside it), members under the directory's name;
    returns the tarball's path. The tarball is written to a temporary name first, then renamed."""
    out_dir = Path(out_dir)
    if not (out_dir / "results.json").exists() and not any(out_dir.iterdir()):
        raise FileNotFoundError(f"{out_dir} is empty")
    tgz = Path(tgz) if tgz else out_dir.with_name(out_dir.name + ".tgz")
    tmp = tgz.with_name(tgz.name + ".part")
    with tarfile.open(tmp, "w:gz") as tf:
        for f in sorted(out_dir.rglob("*")):
            if f.is_file() and f.resolve() != tgz.resolve():
                tf.add(f, arcname=str(Path(out_dir.name) / f.relative_to(out_dir)))
    tmp.replace(tgz)
    return tgz


def _safe_members(tf, dest):
    dest = Path(dest).resolve()
    for m in tf.getmembers():
        target = (dest / m.name).resolve()
        if not (m.isfile() or m.isdir()) or dest not in target.parents and target != dest:
            continue  # links, devices, paths leaving dest: not extracted
        yield m


def unpack(tgz, dest=None):
    """Extract ``tgz`` (regular files and directories only, inside ``dest``) into ``dest`` (default a new
    temporary directory); returns ``dest``."""
    dest = Path(dest) if dest else Path(tempfile.mkdtemp(prefix="ncudnn-bench-"))
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(tgz) as tf:
        tf.extractall(dest, members=list(_safe_members(tf, dest)))
    return dest


def results_dir(path):
    """The directory holding ``results.json`` for ``path``: a results directory itself, or a tarball
    (extracted into a temporary directory; the first results.json inside, shallowest first)."""
    path = Path(path)
    if not is_tarball(path):
        return path
    root = unpack(path)
    found = sorted(root.rglob("results.json"), key=lambda p: len(p.parts))
    if not found:
        raise FileNotFoundError(f"no results.json in {path}")
    return found[0].parent
