"""`ncudnn demo --train` says only what it measured: on the simulator (a few steps on a handful of images) the
loss going down and no accuracy figure; on a GPU the test accuracy against the 95% bar. Engines are the
float64 oracle stand-ins of tests/test_demo.py, so this runs in seconds anywhere."""
import re

from ncudnn import demo

from test_demo import _toy_digits, oracle_engines  # noqa: F401  (a fixture)


def test_simulator_run_reports_the_loss_not_an_accuracy(oracle_engines, capsys, rng):  # noqa: F811
    code = demo.train(small=True, data=_toy_digits(rng))
    out = capsys.readouterr().out
    assert code == 0, out
    assert not re.search(r"accuracy [0-9.]+ ?%", out), out
    losses = [float(v) for v in re.findall(r"epoch \d+: loss ([0-9.]+)", out)]
    line = next(ln for ln in out.splitlines() if ln.startswith("test accuracy: not measured"))
    first, last = (float(v) for v in re.search(r"went ([0-9.]+) -> ([0-9.]+)", line).groups())
    assert (first, last) == (round(losses[0], 4), round(losses[-1], 4)) and last < first
    assert out.rstrip().endswith("PASS")


def test_a_loss_that_does_not_drop_fails(oracle_engines, capsys, monkeypatch, rng):  # noqa: F811
    """The PASS is the loss's, not a formality: SGD with a zero learning rate leaves it flat -> FAIL."""
    orig = demo.Trainer.__init__
    monkeypatch.setattr(demo.Trainer, "__init__", lambda self, *a, **k: orig(self, *a, **dict(k, lr=0.0)))
    code = demo.train(small=True, data=_toy_digits(rng))
    out = capsys.readouterr().out
    assert code == 1 and out.rstrip().endswith("FAIL") and "(not down)" in out, out


def test_missing_scikit_learn_names_the_extra(capsys):
    assert demo.train(data=(None, None)) == 2
    assert "ncudnn[demo]" in capsys.readouterr().out
