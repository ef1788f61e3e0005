"""Negative controls are built only through veil.controls, warn when built, and say what they are (issue 48,
item 9); the front door's docstring examples run."""

from __future__ import annotations

import doctest
import warnings

import pytest

import veil
import veil.controls
from veil.defenses.base import defense_names, get_defense
from veil.errors import InvalidParameterError, NegativeControlWarning, PrivacyLeakWarning, UnknownNameError

CONTROLS = ["deepcandidate-broken-doubled-epsilon", "deepcandidate-broken-doubled-sensitivity",
            "dpsgd-broken-half-noise", "dpsgd-broken-no-clip", "lm-dpsgd-broken-half-noise"]


def _params(name):
    """Valid parameters of each control (a DeepCandidate needs its public candidates)."""
    import numpy as np

    if name.startswith(("dpsgd", "lm-dpsgd")):
        return {"epsilon": 1.0}
    cands = np.random.default_rng(0).normal(size=(6, 4))
    return {"candidates": cands / np.linalg.norm(cands, axis=1, keepdims=True), "epsilon": 1.0}


def test_every_control_is_listed():
    assert veil.controls.control_names() == CONTROLS == sorted(set(defense_names(controls=True)) - set(defense_names()))


@pytest.mark.parametrize("name", CONTROLS)
def test_the_front_door_refuses_a_control(name):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing is built, so nothing warns either
        with pytest.raises(InvalidParameterError, match=rf"'{name}' is a negative control .*protects nothing.*"
                                                        rf"veil\.controls\.make_control\('{name}', \.\.\.\)"):
            veil.make_defense(name, **_params(name))


@pytest.mark.parametrize("name", CONTROLS)
def test_make_control_builds_it_warns_and_its_repr_says_broken(name):
    with pytest.warns(NegativeControlWarning, match=f"{name} is a negative control .*protects nothing") as rec:
        control = veil.controls.make_control(name, **_params(name))
    assert rec[0].filename == __file__  # the warning points at the caller
    assert issubclass(NegativeControlWarning, PrivacyLeakWarning)
    assert isinstance(control, get_defense(name)) and control.control
    text = repr(control)
    assert text.startswith(f"<BROKEN NEGATIVE CONTROL '{name}': ") and "protects nothing" in text
    assert "DPSGD(" not in text and "DeepCandidate(" not in text and "DPFineTuning(" not in text


def test_make_control_refuses_real_defenses_and_unknown_names():
    with pytest.raises(InvalidParameterError, match=r"'dpsgd' is a real defense.*veil\.make_defense\('dpsgd'"):
        veil.controls.make_control("dpsgd", epsilon=1.0)
    with pytest.raises(UnknownNameError, match="unknown negative control 'half-noise'; valid .*broken-half-noise"):
        veil.controls.make_control("half-noise")


def test_a_real_defense_still_comes_through_the_front_door():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert repr(veil.make_defense("dpsgd", epsilon=1.0)).startswith("DPSGD(epsilon=1,")


@pytest.mark.parametrize("obj", [veil.make_defense, veil.defenses.base.make_defense, veil.controls],
                         ids=["veil.make_defense", "veil.defenses.base.make_defense", "veil.controls"])
def test_docstring_examples_run(obj):
    finder, runner = doctest.DocTestFinder(recurse=False), doctest.DocTestRunner(verbose=False)
    tests = finder.find(obj, getattr(obj, "__name__", "doc"), globs={})
    assert sum(len(t.examples) for t in tests) >= 2
    for test in tests:
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0 and result.attempted >= 2
