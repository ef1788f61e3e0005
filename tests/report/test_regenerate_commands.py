"""Every results page ends with the commands that regenerate it, and every such command parses against the CLI."""

from __future__ import annotations

import shlex
from pathlib import Path

import click
import pytest
import typer.main

import veil.cli
from veil.encoders.backends import ENV, backend_names
from veil.report.markdown import backend_lines

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted((ROOT / "docs" / "results").glob("*.md"))


def regenerate_commands(page_text: str) -> list[str]:
    """The ``veil ...`` lines of the page's last section, which must be ``## Regenerate`` ending in a bash block."""
    lines = page_text.rstrip("\n").split("\n")
    heads = [i for i, line in enumerate(lines) if line.startswith("## ")]
    if not heads or lines[heads[-1]] != "## Regenerate":
        raise AssertionError("the last section is not '## Regenerate'")
    section = lines[heads[-1]:]
    if section[-1] != "```" or "```bash" not in section:
        raise AssertionError("the Regenerate section does not end with a ```bash block")
    block = section[section.index("```bash") + 1:-1]
    while block and block[0].startswith("export "):  # only the encoder backend may be set, to a real one
        name, _, value = block.pop(0)[len("export "):].partition("=")
        if name != ENV or value not in backend_names():
            raise AssertionError(f"the Regenerate block sets {name}={value!r}; only {ENV}=<{'|'.join(backend_names())}>")
    if not block or not all(line.startswith("veil ") for line in block):
        raise AssertionError(f"non-command lines in the Regenerate block: {block}")
    return block


def check_command(line: str) -> None:
    """Resolve ``veil A B ... --opts`` in the click tree and parse its options and arguments (no command runs)."""
    words = shlex.split(line)
    if words[0] != "veil":
        raise AssertionError(f"{line!r} does not start with veil")
    cmd: click.Command = typer.main.get_command(veil.cli.app)
    path, rest = ["veil"], words[1:]
    while isinstance(cmd, click.Group):
        if not rest or rest[0] not in cmd.commands:
            raise AssertionError(f"{line!r}: {' '.join(path)} has no command {rest[:1]}")
        path.append(rest[0])
        cmd, rest = cmd.commands[rest[0]], rest[1:]
    try:
        cmd.make_context(" ".join(path), list(rest))
    except click.ClickException as exc:
        raise AssertionError(f"{line!r}: {exc.format_message()}") from exc


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_every_page_ends_with_commands_that_exist(page):
    commands = regenerate_commands(page.read_text())
    assert commands[-1].startswith("veil report --results results --out docs/results")
    for line in commands:
        check_command(line)
    if page.name != "index.md":  # a page of results names the records' folder in at least one writing command
        writers = commands[:-1]
        assert writers, f"{page.name}: only the report command, no command that writes its records"
        assert all(("--results results/" in c) or ("--out results/" in c) for c in writers), writers


def test_the_checker_fails_on_bad_pages_and_commands():
    with pytest.raises(AssertionError, match="last section"):
        regenerate_commands("# x\n\n## Results\n\n```bash\nveil report\n```\n")
    with pytest.raises(AssertionError, match="no command"):
        check_command("veil parse no-such-command --results results/parsing")
    with pytest.raises(AssertionError, match="No such option"):
        check_command("veil parse sweep --no-such-option 3 --results results/parsing")
    with pytest.raises(AssertionError, match="not a valid integer|is not a valid"):
        check_command("veil parse sweep --n-test many --results results/parsing")
    check_command("veil parse sweep --levels P4 --results results/parsing")
    with pytest.raises(AssertionError, match="only VEIL_ENCODER_BACKEND"):
        regenerate_commands("## Regenerate\n\n```bash\nexport VEIL_ENCODER_BACKEND=fast\nveil report\n```")
    with pytest.raises(AssertionError, match="only VEIL_ENCODER_BACKEND"):
        regenerate_commands("## Regenerate\n\n```bash\nexport PATH=/tmp\nveil report\n```")
    assert regenerate_commands("## Regenerate\n\n```bash\nexport VEIL_ENCODER_BACKEND=torch\nveil report\n```") \
        == ["veil report"]


def test_records_of_one_backend_say_which_backend_to_run_under():
    """A block states its records' backend whatever the default is, so pages do not change with the default."""
    assert backend_lines(None) == ([], []) and backend_lines([]) == ([], [])  # a page comparing no backend
    said, shell = backend_lines([{"seed": 0}, {"seed": 1}])  # torch records (no key)
    assert shell == [f"export {ENV}=torch"] and "made with the torch encoder backend" in said[0]
    for backend in ("onnx", "bf16"):
        said, shell = backend_lines([{"encoder_backend": backend}] * 2)
        assert shell == [f"export {ENV}={backend}"] and f"made with the {backend} encoder backend" in said[0]
    said, shell = backend_lines([{"encoder_backend": "onnx"}, {"seed": 0}])
    assert shell == [] and "1 with onnx, 1 with torch or without frozen encoding" in said[0]
    said, shell = backend_lines([{"encoder_backend": "onnx"}, {"encoder_backend": "bf16"}])
    assert shell == [] and "1 with bf16, 1 with onnx" in said[0]


def test_pages_of_torch_records_set_the_torch_backend():
    """The committed records were made with torch: their pages' Regenerate blocks must say so (the default is not)."""
    for name in ("bench.md", "texthide.md", "sentdp.md", "attributes.md", "federated.md", "gradients.md"):
        text = (ROOT / "docs" / "results" / name).read_text()
        assert f"```bash\nexport {ENV}=torch\n" in text, name
