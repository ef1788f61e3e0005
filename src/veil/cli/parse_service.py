"""``veil parse serve`` and ``veil parse client``: thin commands over veil.services (Hu et al. 2020's obfuscated
parsing service), mounted on ``veil parse`` by :mod:`veil.cli.parse`. Every value and output location is checked
before the parser or the vocabulary is loaded.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Annotated, Optional

import typer

from veil.cli.common import ForceOpt, JsonOpt, console, echo_json, finite
from veil.cli.obfuscate import MethodOpt, NeuralModelOpt, check_level, check_method, check_treebank, needs_silver

__all__ = ["parse_serve", "parse_client"]

_DEFAULT_URL = "http://127.0.0.1:8000"


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _default_parser(model: Optional[Path]) -> str:
    """biaffine when a model is given or `veil parse train` made one; else spacy-sm, which ships with veil."""
    from veil.parsing.train import default_model_path

    return "biaffine" if model is not None or default_model_path().is_file() else "spacy-sm"


def _biaffine_hint() -> str:
    from veil.parsing.train import TRAIN_MINUTES
    from veil.parsing.treebank import BUILD_TIME

    return (f"for veil's biaffine parser (it reads the client's tags) run `veil parse treebank` ({BUILD_TIME}) "
            f"then `veil parse train` (about {TRAIN_MINUTES} minutes), then `veil parse serve --parser "
            "biaffine`")


def parse_serve(
    parser: Annotated[Optional[str], typer.Option(
        help="biaffine (veil's, reads tokens and tags; made by `veil parse treebank` (~5 min) then `veil parse "
             "train` (~45 min)), spacy-sm (ships with veil) or spacy-md (downloaded on first use); both spaCy "
             "parsers read tokens and spaces and tag for themselves. Default: biaffine if --model is given or "
             "`veil parse train` made one, else spacy-sm.")] = None,
    model: Annotated[Optional[Path], typer.Option(help="Biaffine model file (default: the one `veil parse train` "
                                                       "wrote).")] = None,
    host: Annotated[str, typer.Option(help="Address to listen on (no TLS, no authentication: keep loopback or put "
                                           "a TLS proxy in front).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="TCP port (0: any free port).")] = 8000,
    max_body_bytes: Annotated[int, typer.Option(min=1, help="Largest request body in bytes (413 above).")] = 1 << 20,
    max_sentences: Annotated[int, typer.Option(min=1, help="Most sentences per request (413 above).")] = 256,
    max_tokens: Annotated[int, typer.Option(min=1, help="Most tokens per sentence (413 above).")] = 256,
    threads: Annotated[int, typer.Option(min=1, help="torch CPU threads of the biaffine parser (1 is fastest on a "
                                                     "shared 2-core machine).")] = 1,
    log_level: Annotated[str, typer.Option(help="uvicorn log level: critical, error, warning, info, debug.")] = "info",
    workers: Annotated[int, typer.Option(help="Server processes on the one port, each with its own parser loaded "
                                              "(at most twice the CPU cores; one per core is the most that helps). "
                                              "Ctrl-C stops them all.")] = 1,
) -> None:
    """Serve a parser over HTTP: POST /parse takes obfuscated tokens and tags, answers heads and labels.

    Works on first use with spacy-sm (it ships with veil); veil's biaffine parser needs `veil parse treebank`
    (about 5 minutes, up to 16 on a busy machine) and `veil parse train` (about 45 minutes) first.
    """
    from veil.parsing.evaluate import PARSER_NAMES
    from veil.services.parse_server import Limits, bind, create_app, serve
    from veil.services.workers import WorkerSpec, check_workers, serve_workers

    if parser is None:
        parser = _default_parser(model)
    if parser not in PARSER_NAMES:
        raise typer.BadParameter(f"--parser must be one of {', '.join(PARSER_NAMES)}, got {parser!r}")
    if model is not None and parser != "biaffine":
        raise typer.BadParameter("--model is for --parser biaffine only")
    if model is not None and not model.is_file():
        raise typer.BadParameter(f"--model {model} is not a file")
    if log_level not in ("critical", "error", "warning", "info", "debug"):
        raise typer.BadParameter(f"--log-level must be critical, error, warning, info or debug, got {log_level!r}")
    check_workers(workers)
    limits = Limits(max_body_bytes=max_body_bytes, max_sentences=max_sentences, max_tokens=max_tokens)
    if parser == "biaffine" and model is None:
        from veil.parsing.train import default_model_path, load_parser

        if not default_model_path().is_file():
            load_parser(None)  # the one-line error: what to run, and how long each step takes
    msg = console(True)
    sock = bind(host, port)  # a port in use is one line, before the parser is loaded
    try:
        if not _is_loopback(host):
            msg.print(f"[yellow]veil: listening on {host}: plain HTTP, no authentication; anyone who can reach it "
                      "can parse with it and read requests on the way; put a TLS proxy in front[/yellow]",
                      soft_wrap=True)
        bound = sock.getsockname()[1]

        def ready(pids: list[int]) -> None:
            how = f" with {workers} workers (processes {', '.join(map(str, pids))})" if workers > 1 else ""
            msg.print(f"veil: serving {parser} on http://{host}:{bound}{how} (POST /parse, GET /health; limits "
                      f"{limits.to_dict()}); Ctrl-C stops it", highlight=False, soft_wrap=True)
            if parser != "biaffine":
                msg.print(f"veil: {_biaffine_hint()}", highlight=False, soft_wrap=True)

        if workers == 1:
            app = create_app(parser, limits=limits, model=model, threads=threads)
            ready([])
    except BaseException:
        sock.close()
        raise
    if workers == 1:
        serve(app, host=host, port=bound, log_level=log_level, sock=sock)
        return
    spec = WorkerSpec(parser, limits, None if model is None else str(model), threads, log_level)
    try:
        serve_workers(spec, sock, workers, on_ready=ready,
                      notify=lambda line: msg.print(f"veil: {line}", style="yellow", markup=False, highlight=False,
                                                    soft_wrap=True))
    finally:
        sock.close()


def parse_client(
    file: Annotated[Path, typer.Argument(help="CoNLL-U (Penn tags in XPOS) or plain text, one sentence per line "
                                              "(tagged with spaCy sm).")],
    out: Annotated[Path, typer.Option(help="Trees over your original words, CoNLL-U (written atomically).")],
    server: Annotated[str, typer.Option(help="URL of a `veil parse serve` server.")] = _DEFAULT_URL,
    level: Annotated[str, typer.Option(help="Obfuscation level: P1..P5 (cumulative, Hu et al. Table 1).")] = "P3",
    treebank: Annotated[str, typer.Option(help="Substitution vocabulary: the train split of silver-sm or of a "
                                               "folder with train.conllu.")] = "silver-sm",
    method: MethodOpt = "random",
    neural_model: NeuralModelOpt = None,
    key: Annotated[Optional[Path], typer.Option(help="Write the secret key (positions and originals) here, "
                                                     "mode 0600; never sent.")] = None,
    seed: Annotated[Optional[int], typer.Option(min=0, help="Reproducible draws (experiments only: warns; default: "
                                                            "OS entropy).")] = None,
    batch: Annotated[int, typer.Option(min=1, help="Sentences per request (fewer if the server takes fewer).")] = 64,
    timeout: Annotated[float, typer.Option(min=0.1, help="Seconds to wait for each answer.")] = 120.0,
    redact_numbers: Annotated[bool, typer.Option(
        "--redact-numbers/--send-numbers",
        help="Replace numbers (tag CD, or any word with a digit: phone, IBAN, account digits) and e-mail and web "
             "addresses (tag ADD) by a placeholder (0, name@example.com, example.com) before sending; no --level "
             "hides them. --send-numbers sends them in clear (warns).")] = True,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Parse a file through a parse server: obfuscate here, parse there.

    Sent: the obfuscated sentence (the words of the tags --level hides replaced by public same-tag words, every
    other word kept as it is), the tags, and the spaces for the spaCy parsers. Numbers and e-mail and web
    addresses are replaced by placeholders before sending unless --send-numbers. Kept here: your words, and the
    key (--key).
    """
    from veil.outputs import check_distinct_outputs, check_output_file
    from veil.services.parse_client import ClientJob, run_client

    if not file.is_file():
        raise typer.BadParameter(f"{file} is not a file")
    if not server.startswith(("http://", "https://")):
        raise typer.BadParameter(f"--server must be an http:// or https:// URL, got {server!r}")
    finite("--timeout", timeout, low=0.0)
    check_level(level)
    check_method(method, neural_model, level)
    check_output_file(out, force=force, option="--out", suffixes=(".conllu",))
    if key is not None:
        check_output_file(key, force=force, option="--key")
        if key.resolve() == out.resolve():
            raise typer.BadParameter("--key and --out name the same file; give the key its own file")
    check_distinct_outputs({"--out": out, "--key": key}, {"FILE": file, "--neural-model": neural_model})
    if method == "random":
        needs_silver(check_treebank(treebank), "veil parse client (its substitution vocabulary)")
    job = ClientJob(input=file, out=out, server=server, level=check_level(level), treebank=check_treebank(treebank),
                    key=key, seed=seed, batch_sentences=batch, timeout=timeout, method=method,
                    neural_model=neural_model, redact_numbers=redact_numbers)
    summary = run_client(job)
    if as_json:
        echo_json(summary)
        return
    console().print(f"parsed {summary['sentences']} sentences ({summary['words']} words, {summary['replaced']} "
                    f"replaced and {summary['redacted']} numbers and addresses redacted before sending) with "
                    f"{summary['parser']} at {summary['server']} in "
                    f"{summary['requests']} requests; wrote {summary['out']}", highlight=False, soft_wrap=True)
