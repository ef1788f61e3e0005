"""Progress outside a terminal: a line at the start, every interval or 10% of the work, and at the end."""

from __future__ import annotations

import io

from veil.progress import LogProgress, format_seconds, progress_bar


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_lines_every_tenth_and_every_interval_with_an_eta():
    out, clock = io.StringIO(), Clock()
    log = LogProgress(100, "encoding", interval=30.0, stream=out, clock=clock)
    for _ in range(100):
        clock.t += 1.0
        log.advance(1)
    log.close()
    lines = out.getvalue().splitlines()
    assert lines[0] == "veil: encoding: started (100 steps)"
    assert lines[-1] == "veil: encoding: done 100/100 in 1m40s"
    middle = lines[1:-1]
    assert len(middle) == 9  # at 10%, 20%, ..., 90%
    assert middle[3] == "veil: encoding: 40/100 (40%), 40s elapsed, ~1m00s left"


def test_slow_work_still_logs_every_interval():
    out, clock = io.StringIO(), Clock()
    log = LogProgress(1000, "training", interval=30.0, stream=out, clock=clock)
    for _ in range(5):  # 0.5% of the work per step, 31 s per step: the interval, not the fraction, triggers
        clock.t += 31.0
        log.advance(5)
    assert len(out.getvalue().splitlines()) == 1 + 5


def test_disabled_and_non_terminal_bars(capsys, monkeypatch):
    monkeypatch.setenv("VEIL_PROGRESS_INTERVAL", "1000")
    with progress_bar(10, "quiet", enabled=False) as advance:
        advance(10)
    assert capsys.readouterr().err == ""
    with progress_bar(4, "work", enabled=True) as advance:  # pytest's stderr is not a terminal
        for _ in range(4):
            advance(1)
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "veil: work: started (4 steps)" and err[-1].startswith("veil: work: done 4/4 in ")


def test_format_seconds():
    assert [format_seconds(s) for s in (0.4, 42, 75, 3725)] == ["0s", "42s", "1m15s", "1h02m"]
