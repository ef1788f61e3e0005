"""After Ctrl-C, what Flower and Ray print about the actors the stop kills never reaches the user (issue 48, item 11).

One of three Ctrl-C'd real runs printed a Ray ``ActorDiedError`` stack (Flower's workers log it, with its
traceback, on the ``flwr`` logger) before exiting 130. Which run does depends on timing, so besides the real run of
test_sigint.py (which asserts no stack), veil's interrupt path is driven here deterministically: Flower's
``run_simulation`` is replaced by one that waits until veil is stopping the run (the real ``_stop_simulation`` is
wrapped to say so) and then does what dying actors make Flower do: logs an ``ActorDiedError`` traceback on the
``flwr`` logger, prints one to ``sys.stderr`` and raises in a thread. Nothing of it may reach a handler or stderr;
other loggers keep working, and so does ``flwr``'s once the simulation has ended.
"""

from __future__ import annotations

import _thread
import logging
import sys
import threading
import traceback

import pytest

STACK = "Traceback (most recent call last):\n  ...\nray.exceptions.ActorDiedError: The actor died unexpectedly"


class Kept(logging.Handler):
    def __init__(self):
        super().__init__()
        self.records = []

    def emit(self, record):
        self.records.append(record.getMessage())


def test_an_interrupted_run_prints_no_stack_from_dying_actors(monkeypatch, capfd):
    import flwr.simulation

    from veil.federated import run as federated_run
    from veil.federated.config import FederatedConfig

    stopping, done = threading.Event(), threading.Event()
    real_stop = federated_run._stop_simulation

    def stop_simulation(finished, *args, **kwargs):
        stopping.set()
        return real_stop(finished, *args, **kwargs)

    def dying_simulation(**kwargs):
        from flwr.common.logger import log

        _thread.interrupt_main()  # Ctrl-C while the simulation runs
        assert stopping.wait(30), "veil did not stop the simulation"
        try:
            raise RuntimeError(STACK)
        except RuntimeError:
            log(logging.ERROR, traceback.format_exc())  # what Flower's vce workers do when an actor dies
        print(STACK, file=sys.stderr)
        worker = threading.Thread(target=lambda: (_ for _ in ()).throw(RuntimeError(STACK)))
        worker.start()
        worker.join()
        done.set()

    monkeypatch.setattr(flwr.simulation, "run_simulation", dying_simulation)
    monkeypatch.setattr(federated_run, "_stop_simulation", stop_simulation)
    monkeypatch.setattr(federated_run, "_descendants", lambda pid: [])  # this test starts no process to end
    flwr_kept, other_kept = Kept(), Kept()
    logging.getLogger("flwr").addHandler(flwr_kept)
    logging.getLogger("veil-test-other").addHandler(other_kept)
    try:
        with pytest.raises(KeyboardInterrupt):
            federated_run._run_flower(FederatedConfig(), None, None, None, None)
        assert done.wait(30)
        logging.getLogger("veil-test-other").error("another logger")
        logging.getLogger("flwr").error("after the simulation ended")
    finally:
        logging.getLogger("flwr").removeHandler(flwr_kept)
        logging.getLogger("veil-test-other").removeHandler(other_kept)
    err = capfd.readouterr().err
    assert "Traceback" not in err and "ActorDiedError" not in err, err
    assert flwr_kept.records == ["after the simulation ended"]
    assert other_kept.records == ["another logger"]
    assert sys.stderr is not None and threading.excepthook is not None
