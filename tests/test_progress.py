"""``edgeprefix.placement.progress``: tqdm on stderr on a terminal, silent elsewhere, overridable."""

from __future__ import annotations

import io

import numpy as np
import pytest

from edgeprefix.placement.progress import bars_enabled, progress_bar


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_silent_off_a_terminal(monkeypatch, capsys):
    monkeypatch.delenv("EDGEPREFIX_PROGRESS", raising=False)
    assert not bars_enabled()  # pytest's captured stderr is not a terminal
    with progress_bar(range(4), desc="work") as bar:
        items = list(bar)
        bar.update(1)
        bar.set_postfix_str("x")
    manual = progress_bar(total=5)
    manual.update(5)
    manual.close()
    assert items == [0, 1, 2, 3]
    assert capsys.readouterr() == ("", "")


def test_shown_on_a_terminal_and_forced_by_the_environment(monkeypatch, capsys):
    monkeypatch.delenv("EDGEPREFIX_PROGRESS", raising=False)
    terminal = _Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    assert bars_enabled()
    assert list(progress_bar(range(3), desc="on a terminal")) == [0, 1, 2]
    assert "on a terminal:" in terminal.getvalue() and "/3 [" in terminal.getvalue()  # tqdm's line, drawn
    monkeypatch.setenv("EDGEPREFIX_PROGRESS", "0")  # silences even a terminal
    assert not bars_enabled()
    monkeypatch.undo()

    monkeypatch.setenv("EDGEPREFIX_PROGRESS", "1")  # forces a bar where stderr is no terminal
    assert bars_enabled()
    with progress_bar(total=4, desc="forced", unit="run") as bar:
        bar.update(4)
        bar.refresh()  # tqdm redraws at most every 0.1 s by itself
    captured = capsys.readouterr()
    assert captured.out == ""  # never on stdout
    assert "forced" in captured.err and "4/4" in captured.err


@pytest.mark.parametrize("value", ["", "yes", "2"])
def test_other_values_fall_back_to_the_terminal_test(monkeypatch, value):
    monkeypatch.setenv("EDGEPREFIX_PROGRESS", value)
    assert not bars_enabled()


def test_solve_callback_advances_the_bar_to_the_evaluation_count(monkeypatch, capsys):
    from edgeprefix.commands.solve import progress_callback
    from edgeprefix.solvers import Progress

    monkeypatch.setenv("EDGEPREFIX_PROGRESS", "1")
    callback, bar = progress_callback(10, "spsa")
    for nfev, best in ((3, 0.7), (7, 0.8123)):
        callback(Progress(nfev=nfev, budget=10, best_value=best, best_coverage=best, best_x=np.ones(3) / 3, value=best, feasible=True))
    assert bar.n == 7
    bar.refresh()
    bar.close()
    err = capsys.readouterr().err
    assert "solve spsa" in err and "7/10" in err and "best coverage 0.8123" in err
