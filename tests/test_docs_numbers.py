"""Every measured number in docs/*.md and README.md comes from a record or benchmarks/RESULTS.md through a generated
fragment (``veil.report.fragments``), or is not there.

(a) a measured-looking number (a decimal, a percentage, a duration, a ratio such as 1.3x) outside code and outside
    fragments fails, unless ALLOWED names it with the reason it is not a measurement of ours;
(b) a fragment whose text differs from what results/ and benchmarks/RESULTS.md render today fails (stale);
(c) a fragment that compares things (``compares=True``: ``COMPARISONS``) states each direction itself, worded from
    the data, and the prose next to it (its own paragraph and the paragraphs right before and after it, up to a
    heading or a code block) states none by hand: a direction word there (better, worse, lower, higher, beats, more
    or less private, above, below) fails unless DIRECTION_ALLOWED names it with the reason it is not a restated
    direction. So a re-run that turns a comparison round changes the page with it, and cannot leave prose saying
    the opposite.
docs/results/*.md is not scanned: those pages are rendered from the records whole (tests/report checks them).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from veil.report import fragment_texts  # noqa: F401  (registers the fragments, COMPARISONS among them)
from veil.report.fragments import (COMPARISONS, DIRECTION_WORDS, FRAGMENT_RE, NO_DIRECTION_WORDS, fill_text,
                                   render_fragment, stale)

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]

MEASURED = re.compile(r"""(?x)(?<![\w.\-])(
    \d+(?:[.,]\d+)*(?:-\d+(?:[.,]\d+)*)?\s?%                                   # 12%, 99.9-100%
  | \d+(?:\.\d+)?(?:-\d+(?:\.\d+)?)?\s?(?:x|×)(?=[\s,;.)]|$)                    # 1.3x, 1.4-1.5x
  | \d+(?:[.,]\d+)*(?:-\d+(?:[.,]\d+)*)?\s?(?:minutes?|mins?|hours?|h|seconds?|s|ms|us|days?)\b   # 45 minutes
  | \d*\.\d+                                                                   # 84.7, 0.91
)""")

# Not measurements: versions, section and table numbers of papers, release names.
NOT_MEASURED = re.compile(r"""(?x)
    \b\d+\.\d+\.\d+[\w.]*                                   # versions: 3.8.0, 0.2.2, 127.0.0.1
  | (?:Sec\.|Section|App\.|Appendix|Table|Tables|Fig\.|Python|Flower\]?|CC\ BY|IEEE\ S&P)\s*[\d.]+(?:-[\d.]+)?
  | \d+(?:\.\d+)?e-\d+                                      # 1e-3, 1.4e-11 (parameters, exact values)
""")

# (page or "*", exact text, why it is not a measurement of ours). Keep it short; never a result of veil's.
ALLOWED: list[tuple[str, str, str]] = [
    ("*", "95%", "a confidence level (a parameter of the interval), not a measurement"),
    ("reliability.md", "every 30 s or every 10% of the work", "the progress-line interval, a setting of veil's"),
    ("reliability.md", "changes the 30 s", "the progress-line interval, a setting of veil's logging"),
    ("README.md", "every 30 s or 10%", "the progress-line interval, a setting of veil's logging"),
    ("attacks-gradients.md", "above 0.05", "a threshold parameter of the attack"),
    ("attributes.md", "{0.5, 0.45, ..., 0.1} (0.5 is", "the attacker's threshold grid (parameters; 0.5 is the paper's)"),
    ("attributes.md", "arg-max / 0.5 rule", "a decision threshold (parameter)"),
    ("attributes.md", "alpha (0.5 - s(z, z'))", "the declustering objective's constant (the paper's formula)"),
    ("attributes.md", "declustering alpha = 0.1", "a default hyperparameter (the paper's)"),
    ("attributes.md", "at least 40% of the time", "a filtering threshold (parameter)"),
    ("attributes.md", "10% of its mentions", "a filtering threshold (parameter)"),
    ("bench.md", "alpha = 0.05", "a significance level (parameter)"),
    ("corpora.md", "10% of the official train file", "the split rule (parameter)"),
    ("dpsgd.md", "TPR at 1% and 0.1% FPR", "the false-positive rates at which TPR is read (parameters)"),
    ("federated.md", "22.7M parameters, or 91 MB", "the size of all-MiniLM-L6-v2's weights, not a measurement"),
    ("federated.md", "default 0.5", "a default learning rate (parameter)"),
    ("federated.md", "alpha = 0.1", "a Dirichlet parameter in an example"),
    ("parsing.md", "betas 0.9, 0.9", "optimiser hyperparameters"),
    ("parsing.md", "replacement 0.25", "a training hyperparameter"),
    ("parsing.md", "3 x 512", "the authors' network size"),
    ("parsing.md", "1 x 128", "the obfuscator's network size (parameter)"),
    ("parsing.md", "from 1 to 0.5", "the Gumbel temperature schedule (parameter)"),
    ("parsing.md", "chosen on 5%", "the attacker's dev share (parameter)"),
    ("parsing.md", "The paper's gap at P5 is -3.0 (the paper's trained attacker: 67.2 → 64.2)",
     "the paper's numbers (Hu et al. 2020, Table 2), labelled as such"),
    ("parsing.md", "(94.1 / 31.7 = 2.97)", "the paper's numbers (Hu et al. 2020, Table 2), labelled as such"),
    ("sentdp.md", "central 75% interval", "a clipping parameter of the mechanism"),
    ("texthide.md", "dropout 0.1", "a training parameter of the recorded runs"),
]


def _strip(text: str, page: str) -> list[tuple[int, str]]:
    """The prose lines of ``text`` (code blocks, inline code, link targets and fragments removed), numbered."""
    text = FRAGMENT_RE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    out, in_code = [], False
    for i, line in enumerate(text.split("\n"), 1):
        if line.lstrip().startswith("```"):
            in_code = not in_code
            continue
        if in_code:
            continue
        line = re.sub(r"`[^`]*`", "", line)
        line = re.sub(r"\]\([^)]*\)", "]", line)
        for where, allowed, _ in ALLOWED:
            if where in ("*", page):
                line = line.replace(allowed, "")
        out.append((i, NOT_MEASURED.sub("", line)))
    return out


def unbacked_numbers(text: str, page: str = "page.md") -> list[str]:
    """'page:line: number | line' for every measured-looking number outside code, fragments and ALLOWED."""
    return [f"{page}:{i}: {m.group(1)} | {line.strip()[:100]}" for i, line in _strip(text, page)
            for m in MEASURED.finditer(line)]


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_no_unbacked_measured_number(page):
    hits = unbacked_numbers(page.read_text(encoding="utf-8"), page.name)
    assert not hits, ("numbers with no generated source (put them in a fragment of veil.report.fragment_texts, "
                      "or remove them and link the results page):\n" + "\n".join(hits))


def test_no_fragment_is_stale():
    """Each fragment's text is exactly what the records and benchmarks/RESULTS.md render today."""
    found = stale(ROOT / "docs", ROOT / "results", ROOT / "benchmarks" / "RESULTS.md", ROOT / "README.md")
    assert not found, ("stale fragments (run `make report`, i.e. "
                       "`veil report --results results --out docs/results --docs docs`): " + ", ".join(f"{p.name}:{n}" for p, n in found))


def test_fragments_are_used_and_allowlist_entries_still_match():
    used = {m["name"] for p in PAGES for m in FRAGMENT_RE.finditer(p.read_text(encoding="utf-8"))}
    from veil.report import fragment_texts  # noqa: F401
    from veil.report.fragments import FRAGMENTS

    assert used <= set(FRAGMENTS) and set(FRAGMENTS) <= used, (used ^ set(FRAGMENTS))
    texts = {p.name: p.read_text(encoding="utf-8") for p in PAGES}
    dead = [(w, a) for w, a, _ in ALLOWED if not any(a in t for n, t in texts.items() if w in ("*", n))]
    assert not dead, f"allowlist entries that match nothing (remove them): {dead}"


def test_the_scan_catches_hand_typed_numbers():
    doc = ("# A page\n\nTraining takes 45 minutes and reaches 84.7 UAS, 0.91 F1, 12% more, 1.3x faster, 3 h, "
           "200 s.\n\n```bash\nveil run --lr 0.5   # 45 minutes\n```\n\nVersion 3.8.0 (Sec. 4.4), a 95% CI, "
           "`0.5` in code.\n<!-- veil:fragment x -->UAS 91.9<!-- /veil:fragment -->\n")
    found = [h.split(": ")[1].split(" |")[0] for h in unbacked_numbers(doc)]
    assert found == ["45 minutes", "84.7", "0.91", "12%", "1.3x", "3 h", "200 s"]


def test_a_stale_fragment_is_found_and_refilled(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    page = docs / "p.md"
    page.write_text("Speed: <!-- veil:fragment parsing-throughput -->999 sentences/s<!-- /veil:fragment -->.\n")
    bench = ROOT / "benchmarks" / "RESULTS.md"
    assert stale(docs, ROOT / "results", bench, readme=None) == [(page, "parsing-throughput")]
    refilled = fill_text(page.read_text(), ROOT / "results", bench)
    assert "999" not in refilled and "sentences/s against" in refilled
    page.write_text(refilled)
    assert stale(docs, ROOT / "results", bench, readme=None) == []


# ---- (c) directions: generated beside a comparison, never restated by hand ------------------------------------

#: "above" / "below" naming a place on the page, not a direction
POSITIONAL = re.compile(r"""(?ix)
    \b(?:rows?|tables?|sections?|lines?|list|bullets?|figures?|plots?|page|paragraphs?|see|as|named|shown|listed)
    \s+(?:above|below)\b
  | \[(?:above|below)\]
""")

# (page, exact text (whitespace collapsed), why it is not a hand-restated direction of the adjacent comparison).
DIRECTION_ALLOWED: list[tuple[str, str, str]] = [
    ("attributes.md", 'does at least as well as against the undefended model, and under some attackers better (the '
     '"lower" verdicts above)', "a hand restatement, consistent with attributes-findings when this entry was added "
     "(verdicts 'lower' and 'no difference shown', none 'higher'); debt: reword it to point at the verdicts"),
    ("attributes.md", "The adversary is beaten by a representation",
     "the training-time adversary at its floor (the fragment states where it ends), not the direction of a comparison"),
    ("attributes.md", "names one below it", "points at the fragment's own 'below it' list; states no direction itself"),
]


def _prose_blocks(text: str) -> list[tuple[int, str, bool]]:
    """(offset, text, is prose) per paragraph of ``text``: fragments and fenced code masked in place, character for
    character (so offsets stay those of ``text`` and their blank lines do not split a paragraph), headings and code
    blocks marked as not prose."""
    text = FRAGMENT_RE.sub(lambda m: "\0" * len(m.group(0)), text)
    text = re.sub(r"(?ms)^```.*?^```[^\n]*", lambda m: "\1" * len(m.group(0)), text)
    out, offset = [], 0
    for block in re.split(r"(\n[ \t]*\n)", text):
        if block.strip() and not re.fullmatch(r"\n[ \t]*\n", block):
            head = block.lstrip()
            out.append((offset, block, not (head.startswith("#") or head.startswith("\1"))))
        offset += len(block)
    return out


def _clean(block: str, page: str) -> str:
    text = block.replace("\0", " ")
    text = re.sub(r"`[^`]*`", "", text)
    text = re.sub(r"\]\([^)]*\)", "]", text)
    text = " ".join(text.split())
    for where, allowed, _ in DIRECTION_ALLOWED:
        if where in ("*", page):
            text = text.replace(" ".join(allowed.split()), "")
    return POSITIONAL.sub("", text)


def hand_directions(text: str, page: str = "page.md", comparisons: set[str] | None = None) -> list[str]:
    """'page:line: fragment NAME: word | context' for every direction word written by hand in the paragraph of a
    comparison fragment or in the prose paragraph right before or after it (``comparisons``: default
    ``COMPARISONS``)."""
    comparisons = COMPARISONS if comparisons is None else comparisons
    blocks = _prose_blocks(text)
    hits = []
    for m in FRAGMENT_RE.finditer(text):
        if m["name"] not in comparisons:
            continue
        i = max(k for k, (start, _, _) in enumerate(blocks) if start <= m.start())
        for j in (i - 1, i, i + 1):
            if 0 <= j < len(blocks) and blocks[j][2]:
                prose = _clean(blocks[j][1], page)
                line = text.count("\n", 0, blocks[j][0]) + 1
                hits += [f"{page}:{line}: fragment {m['name']}: {w.group(0)!r} | "
                         f"{prose[max(0, w.start() - 60):w.end() + 60]}" for w in DIRECTION_WORDS.finditer(prose)]
    return list(dict.fromkeys(hits))


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_no_hand_written_direction_next_to_a_comparison(page):
    hits = hand_directions(page.read_text(encoding="utf-8"), page.name)
    assert not hits, ("directions written by hand next to a comparison fragment (its text states the direction from "
                      "the data; say what the reader should look at, not which way it went):\n" + "\n".join(hits))


def test_comparison_fragments_carry_a_generated_direction():
    """A comparison fragment's text states a direction (or that there is none); a fragment whose text states one is
    declared a comparison (``register_fragment(..., compares=True)``), so its neighbours are checked."""
    used = {m["name"] for p in PAGES for m in FRAGMENT_RE.finditer(p.read_text(encoding="utf-8"))}
    silent, undeclared = [], []
    for name in sorted(used):
        text = render_fragment(name, ROOT / "results", ROOT / "benchmarks" / "RESULTS.md")
        if name in COMPARISONS and text.strip() and not (DIRECTION_WORDS.search(text)
                                                         or NO_DIRECTION_WORDS.search(text)):
            silent.append(name)
        if name not in COMPARISONS and DIRECTION_WORDS.search(text):
            undeclared.append(name)
    assert not silent, f"comparison fragments whose text states no direction: {silent}"
    assert not undeclared, f"fragments that state a direction but are not registered with compares=True: {undeclared}"


PLANTED = """# A page

Some context far away: random substitution is better here (two paragraphs off: not checked).

The results page compares them. The trained attacker does better against the neural obfuscator than against
random substitution at P2 (intervals below 0). From the records:

<!-- veil:fragment cmp -->
- trained attacker, Δ prv: P2 +1.2 [+0.3, +2.0] (neural more private, 3 seeds).
<!-- /veil:fragment -->

- The paper's numbers are in its Table 2 (the rows above say where).

## Next section

A neutral sentence, but `higher` in code and a [link](higher.md) are not prose.
"""


def test_negative_control_a_hand_direction_that_contradicts_its_fragment_is_caught():
    hits = hand_directions(PLANTED, "planted.md", {"cmp"})
    words = [h.split(": ")[2].split(" |")[0] for h in hits]
    assert words == ["'better'", "'below'"], hits
    assert all(":5: fragment cmp" in h for h in hits)


def test_the_direction_scan_leaves_the_fragment_its_far_neighbours_and_non_comparisons_alone():
    neutral = PLANTED.replace("The trained attacker does better against the neural obfuscator than against\n"
                              "random substitution at P2 (intervals below 0). ", "")
    assert hand_directions(neutral, "planted.md", {"cmp"}) == []
    assert hand_directions(PLANTED, "planted.md", set()) == []   # not a comparison: its prose is not checked
    inline = "Context.\n\nSpeed: <!-- veil:fragment cmp -->X<!-- /veil:fragment -->, which is higher.\n"
    assert [h.split(": ")[2].split(" |")[0] for h in hand_directions(inline, "p.md", {"cmp"})] == ["'higher'"]


def test_direction_allowlist_entries_still_match():
    texts = {p.name: " ".join(p.read_text(encoding="utf-8").split()) for p in PAGES}
    dead = [(w, a) for w, a, _ in DIRECTION_ALLOWED
            if not any(" ".join(a.split()) in t for n, t in texts.items() if w in ("*", n))]
    assert not dead, f"direction allowlist entries that match nothing (remove them): {dead}"
