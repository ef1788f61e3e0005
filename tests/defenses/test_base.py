"""veil.defenses.base: the shared defense contract, registry and validation helpers."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from veil.defenses import NO_GUARANTEE, Defense, Guarantee, defense_names, get_defense, register_defense
from veil.validation import check_choice, check_int, check_real, check_rng
from veil.errors import InvalidParameterError, InvalidTypeError, UnknownNameError


def test_registry_resolves_lazily_and_lists_names():
    assert "texthide" in defense_names()
    cls = get_defense("texthide")
    from veil.defenses.texthide import TextHide

    assert cls is TextHide and issubclass(cls, Defense) and cls.name == "texthide"
    with pytest.raises(UnknownNameError, match="valid defense names: .*texthide"):
        get_defense("instahide")


def test_register_defense_refuses_conflicts_and_bad_targets():
    register_defense("texthide", "veil.defenses.texthide:TextHide")  # same target: no-op
    with pytest.raises(InvalidParameterError, match="already registered"):
        register_defense("texthide", "elsewhere:Thing")
    with pytest.raises(InvalidTypeError, match="module:attribute"):
        register_defense("x", "no_colon")


def test_guarantee_is_data():
    assert str(NO_GUARANTEE) == "none: heuristic (no formal guarantee)" and not NO_GUARANTEE.formal
    g = Guarantee("epsilon-dp", "sentence-level DP", epsilon=2.0)
    assert g.formal and json.loads(json.dumps(g.to_dict()))["epsilon"] == 2.0


def test_validation_helpers():
    assert check_int("k", np.int64(3), minimum=1) == 3
    with pytest.raises(InvalidTypeError):
        check_int("k", True)
    with pytest.raises(InvalidTypeError):
        check_int("k", 2.0)
    with pytest.raises(InvalidParameterError, match=r"\[1, inf\]"):
        check_int("k", 0, minimum=1)
    assert check_real("b", 0.5, low=0.25, high=1, low_open=True) == 0.5
    for bad in (0.25, float("nan"), 1.5):
        with pytest.raises(InvalidParameterError, match=r"\(0.25, 1\]"):
            check_real("b", bad, low=0.25, high=1, low_open=True)
    with pytest.raises(InvalidParameterError, match="'a', 'b'"):
        check_choice("mode", "c", ("a", "b"))
    with pytest.raises(InvalidTypeError):
        check_choice("mode", 1, ("a", "b"))
    check_rng(None), check_rng(3), check_rng(np.random.default_rng(0))
    with pytest.raises(InvalidTypeError):
        check_rng(1.5)
    with pytest.raises(InvalidParameterError):
        check_rng(-1)


def test_importing_defenses_does_not_import_torch():
    code = ("import sys, veil.defenses, veil.defenses.texthide; "
            "heavy = [m for m in ('torch', 'transformers', 'scipy', 'sklearn', 'spacy', 'faiss') if m in sys.modules]; "
            "sys.exit(repr(heavy) if heavy else 0)")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_check_epsilon_warns_only_above_the_meaningful_range():
    import warnings

    from veil.validation import MEANINGFUL_EPSILON, check_epsilon
    from veil.errors import InvalidParameterError, PrivacyLeakWarning

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert check_epsilon(MEANINGFUL_EPSILON) == MEANINGFUL_EPSILON  # the boundary itself is fine
    with pytest.warns(PrivacyLeakWarning, match="above 50"):
        check_epsilon(1e308)
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(InvalidParameterError, match="finite epsilon > 0"):
            check_epsilon(bad)
