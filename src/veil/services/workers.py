"""Several parse-server processes behind one port (``veil parse serve --workers N``): a small pre-fork supervisor.

The supervisor (the ``veil parse serve`` process) binds the port once (:func:`~veil.services.parse_server.bind`:
a port in use is one line before anything loads), then starts ``N`` worker processes. Each worker is a fresh
interpreter (multiprocessing's ``spawn``: nothing is inherited but the listening socket and a pipe to the
supervisor), loads its own parser and runs its own uvicorn server with the app of
:func:`~veil.services.parse_server.create_app`, so every check (400/413/415/422, the limits) is the same code in
every worker. On Linux each worker listens on its own socket bound to the port with SO_REUSEPORT, from the moment
its parser is loaded, and the kernel spreads new connections over the workers (see :class:`_Pool`); elsewhere
the workers share the supervisor's socket. A connection stays with its worker (HTTP keep-alive), so the load
spreads over several connections (several clients), not within one.

Stopping: Ctrl-C (SIGINT) or SIGTERM to the supervisor asks every worker to finish (uvicorn's graceful shutdown,
requests in flight get at most :data:`GRACE_S` seconds), kills any worker still there after that, and returns
(SIGTERM) or raises ``KeyboardInterrupt`` (Ctrl-C: ``veil`` exits with 130). Workers start with SIGINT ignored,
so a Ctrl-C in the terminal (sent to every process of the group) is handled once, by the supervisor. A worker
also stops when the supervisor is gone (its end of the pipe closes), so no worker outlives a killed supervisor
for long. A worker that dies while serving is replaced; workers that keep dying (:data:`MAX_RESTARTS` within a
minute) stop the service with an error.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from veil.errors import InvalidParameterError, InvalidTypeError, ParseServiceError, VeilError

__all__ = ["WorkerSpec", "max_workers", "check_workers", "serve_workers", "GRACE_S", "MAX_RESTARTS"]

#: seconds a worker gets to finish its requests in flight once asked to stop (then it is killed)
GRACE_S = 3.0
#: worker deaths within a minute after which the service stops instead of starting more
MAX_RESTARTS = 5


@dataclass(frozen=True)
class WorkerSpec:
    """What each worker serves: ``create_app(parser, limits=limits, model=model, threads=threads)``."""

    parser: str
    limits: Any  # veil.services.parse_server.Limits
    model: str | None = None
    threads: int = 1
    log_level: str = "info"


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def max_workers() -> int:
    """The most workers allowed on this machine: twice its CPU cores (each worker holds a parser in memory, and
    workers beyond the cores add no throughput: parsing is CPU work)."""
    return 2 * _cpus()


def check_workers(workers: Any) -> int:
    """``workers`` if it is an int in 1..:func:`max_workers`, else a typed error that says what to pass."""
    if isinstance(workers, bool) or not isinstance(workers, int):
        raise InvalidTypeError(f"--workers must be a whole number, got {workers!r}")
    if workers < 1:
        raise InvalidParameterError(f"--workers must be at least 1 (one process per parser), got {workers}")
    limit = max_workers()
    if workers > limit:
        raise InvalidParameterError(
            f"--workers {workers} is more than {limit}, twice this machine's {_cpus()} CPU cores: each worker is a "
            f"process with its own parser in memory, and workers beyond the cores add no throughput; pass "
            f"--workers {_cpus()}")
    return workers


# ---- the worker process --------------------------------------------------------------------------------------

def _worker(spec: WorkerSpec, sock: Any, conn: Any) -> None:
    """One worker: load the parser, say "ready" on ``conn``, serve on ``sock`` until the supervisor says stop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the supervisor decides when the workers stop
    holder: dict[str, Any] = {}

    def watch() -> None:  # "stop" from the supervisor, or EOF when it is gone
        with contextlib.suppress(EOFError, OSError):
            conn.recv()
        server = holder.get("server")
        if server is None:  # still loading the parser: nothing to finish
            os._exit(0)
        server.should_exit = True

    threading.Thread(target=watch, name="veil-worker-lifeline", daemon=True).start()
    try:
        from veil.services.parse_server import _uvicorn_config, create_app

        app = create_app(spec.parser, limits=spec.limits, model=spec.model, threads=spec.threads)
        import uvicorn

        host, port = sock.getsockname()[:2]
        holder["server"] = uvicorn.Server(_uvicorn_config(app, host, port, spec.log_level,
                                                          timeout_graceful_shutdown=GRACE_S))
    except BaseException as exc:  # told to the supervisor, which stops the service with this line
        with contextlib.suppress(OSError):
            conn.send(("error", str(exc) if isinstance(exc, VeilError) else f"{type(exc).__name__}: {exc}"))
        os._exit(2)
    server = holder["server"]

    def announce() -> None:  # "ready" once uvicorn listens and serves
        while not server.started and not server.should_exit:
            time.sleep(0.02)
        if server.started:
            with contextlib.suppress(OSError):
                conn.send(("ready", os.getpid()))

    threading.Thread(target=announce, name="veil-worker-ready", daemon=True).start()
    try:
        server.run(sockets=[sock])  # listens on sock (uvicorn calls listen) once the parser is loaded
    except SystemExit:  # uvicorn could not listen; it logged why
        with contextlib.suppress(OSError):
            conn.send(("error", f"it could not listen on {host}:{port} (see the worker's log line above)"))
        os._exit(2)
    # the worker owns no file: skip the interpreter's teardown (freeing a loaded parser can take seconds)
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(0)


# ---- the supervisor ------------------------------------------------------------------------------------------

class _Terminated(Exception):
    """SIGTERM reached the supervisor: stop the workers and return."""


def _on_sigterm(signum: int, frame: Any) -> None:
    raise _Terminated


@contextlib.contextmanager
def _sigint_ignored() -> Iterator[None]:
    """SIGINT ignored while a worker is started, so the new interpreter starts with it ignored too."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _balanced() -> bool:
    """Whether each worker gets its own listening socket on the port (Linux's SO_REUSEPORT: the kernel spreads
    new connections over the workers evenly); elsewhere the workers share one socket."""
    import socket

    return sys.platform.startswith("linux") and hasattr(socket, "SO_REUSEPORT")


class _Pool:
    """The workers, and the socket each listens on.

    On Linux each worker gets its own socket, bound to the port with SO_REUSEPORT and not yet listening (the
    worker listens once its parser is loaded, so no connection waits on a loading worker), and the kernel spreads
    connections over the listening ones by their addresses. One shared socket would not do: a worker's event loop
    accepts every connection waiting when it wakes, so a burst of clients lands on one worker.
    """

    def __init__(self, spec: WorkerSpec, sock: Any) -> None:
        import multiprocessing

        self.spec, self.sock, self.ctx = spec, sock, multiprocessing.get_context("spawn")
        self.workers: list[tuple[Any, Any]] = []  # (process, the supervisor's end of its pipe)
        self.balanced = _balanced()
        self.family, self.address = sock.family, sock.getsockname()
        if self.balanced:
            sock.close()  # the port was free (bind() checked it); the workers' sockets take it now

    def listener(self) -> Any:
        """The socket for a new worker: its own (SO_REUSEPORT, bound, not listening), or the shared one."""
        import socket

        if not self.balanced:
            return self.sock
        sock = socket.socket(self.family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            sock.bind(self.address)
        except OSError as exc:
            sock.close()
            host, port = self.address[:2]
            raise InvalidParameterError(f"cannot listen on {host}:{port}: {exc.strerror or exc} (taken while the "
                                        "workers started?); pass another --port (--port 0 picks a free one)") from None
        return sock

    def start(self) -> tuple[Any, Any]:
        ours, theirs = self.ctx.Pipe(duplex=True)
        sock = self.listener()
        try:
            proc = self.ctx.Process(target=_worker, args=(self.spec, sock, theirs), name="veil-parse-worker",
                                    daemon=False)
            with _sigint_ignored():
                proc.start()
        finally:
            theirs.close()
            if self.balanced:
                sock.close()  # the worker holds its own copy; ours would keep a socket that nobody serves
        self.workers.append((proc, ours))
        return proc, ours

    def wait_ready(self) -> list[int]:
        """The pids of all workers once each has loaded its parser; a worker that fails stops the service."""
        from multiprocessing.connection import wait

        pending = {conn: proc for proc, conn in self.workers}
        pids = []
        while pending:
            for ready in wait(list(pending) + [p.sentinel for p in pending.values()]):
                conn = ready if ready in pending else next((c for c, p in pending.items() if p.sentinel == ready),
                                                           None)
                if conn is None:
                    continue
                proc = pending.pop(conn)
                message = _message(conn)
                if message is None or message[0] != "ready":
                    proc.join(1)
                    why = message[1] if message else f"it exited with code {proc.exitcode}"
                    raise ParseServiceError(f"a parse-server worker could not start: {why}")
                pids.append(message[1])
        return pids

    def stop(self) -> None:
        """Ask every worker to stop; kill those still there after the grace period; reap them all."""
        for _, conn in self.workers:
            with contextlib.suppress(OSError):
                conn.send("stop")
        deadline = time.monotonic() + GRACE_S + 2.0
        for proc, conn in self.workers:
            proc.join(max(0.0, deadline - time.monotonic()))
        for proc, conn in self.workers:
            if proc.is_alive():
                proc.kill()
                proc.join(5)
            conn.close()
        self.workers.clear()


def _message(conn: Any) -> Any:
    """The next message on ``conn``, or None when there is none (the worker is gone)."""
    try:
        return conn.recv() if conn.poll(0.5) else None
    except (EOFError, OSError):
        return None


def serve_workers(spec: WorkerSpec, sock: Any, workers: int, *,
                  on_ready: Callable[[list[int]], None] | None = None,
                  notify: Callable[[str], None] | None = None) -> None:
    """Serve ``spec`` with ``workers`` processes on the listening socket ``sock`` (from
    :func:`~veil.services.parse_server.bind`) until Ctrl-C (raises ``KeyboardInterrupt``) or SIGTERM (returns).

    On Linux ``sock`` only reserved the port: it is closed, and each worker gets its own socket on the same
    address (see :class:`_Pool`). ``on_ready(pids)`` is called once every worker has loaded its parser;
    ``notify(line)`` gets a line when a worker dies and is replaced. A worker that cannot load its parser raises
    :class:`ParseServiceError` with its reason, after every worker is stopped.
    """
    from multiprocessing.connection import wait

    if not isinstance(spec, WorkerSpec):
        raise InvalidTypeError("spec must be a veil.services.workers.WorkerSpec")
    check_workers(workers)
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _on_sigterm) if main else None
    pool, deaths = _Pool(spec, sock), deque(maxlen=MAX_RESTARTS)
    try:
        for _ in range(workers):
            pool.start()
        pids = pool.wait_ready()
        if on_ready is not None:
            on_ready(pids)
        while True:
            wait([proc.sentinel for proc, _ in pool.workers])
            for proc, conn in [w for w in pool.workers if not w[0].is_alive()]:
                proc.join()
                message = _message(conn)
                conn.close()
                pool.workers.remove((proc, conn))
                deaths.append(time.monotonic())
                why = f" ({message[1]})" if message and message[0] == "error" else ""
                if len(deaths) == MAX_RESTARTS and deaths[-1] - deaths[0] < 60:
                    raise ParseServiceError(f"parse-server workers keep dying ({MAX_RESTARTS} within a minute, the "
                                            f"last with exit code {proc.exitcode}{why}); see the log above")
                if notify is not None:
                    notify(f"worker {proc.pid} exited with code {proc.exitcode}{why}; starting another")
                pool.start()
    except _Terminated:
        pass
    finally:
        pool.stop()
        if main:
            signal.signal(signal.SIGTERM, previous)
