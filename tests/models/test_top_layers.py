"""MiniLM's top layers with veil's head (veil.models.top_layers): with the layers as shipped, the pooled vector is
MiniLM's own sentence embedding; DP-SGD trains the copied layers and the head through Opacus, and the frozen encoder
is never touched."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from veil.errors import InvalidParameterError, PrivacyLeakWarning
from veil.models.top_layers import build_top_layers, frozen_inputs, load_minilm

pytestmark = pytest.mark.slow

TEXTS = ["a gripping, moving film", "the plot is thin and the acting worse", "fine.",
         "an unexpectedly tender portrait of two brothers who cannot stand each other"]


@pytest.fixture(scope="module")
def minilm():
    return load_minilm()


def test_with_the_shipped_layers_the_pooled_vector_is_minilms_sentence_embedding(minilm):
    from veil.encoders import TextEncoder

    bert, tokenizer = minilm
    X = frozen_inputs(TEXTS, trained=2, max_length=48, bert=bert, tokenizer=tokenizer)
    assert X.shape == (4, 48 * 385) and X.dtype == np.float32
    model = build_top_layers(num_classes=2, trained=2, max_length=48, init_seed=0, bert=bert).eval()
    with torch.no_grad():
        pooled = model.pooled(torch.from_numpy(X)).numpy()
    pooled /= np.linalg.norm(pooled, axis=1, keepdims=True)
    ref = TextEncoder("minilm", backend="torch").encode(TEXTS)
    np.testing.assert_allclose(pooled, ref, atol=1e-5)
    with pytest.raises(InvalidParameterError):
        build_top_layers(num_classes=2, trained=7, bert=bert)


def test_dp_sgd_trains_the_copied_layers_and_the_head_and_leaves_minilm_alone(minilm):
    from veil.defenses.dpsgd import DPSGD

    bert, tokenizer = minilm
    before = {k: v.clone() for k, v in bert.state_dict().items()}
    X = frozen_inputs(TEXTS * 8, trained=1, max_length=16, bert=bert, tokenizer=tokenizer)
    y = np.arange(len(X)) % 2
    model = build_top_layers(num_classes=2, trained=1, max_length=16, hidden=(8,), init_seed=0, bert=bert)
    start = [p.detach().clone() for p in model.parameters()]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        out = DPSGD(epsilon=8.0, epochs=2, batch_size=8, model=model, num_classes=2, init_seed=0, rng=0).train((X, y))
    after = list(out.model.parameters())
    assert len(after) == len(start) and all(not torch.equal(a, b) for a, b in zip(after, start))  # all trained
    assert all(torch.equal(v, before[k]) for k, v in bert.state_dict().items())  # the frozen encoder is not
    assert out.logits(X).shape == (len(X), 2) and out.accounting.steps == out.steps


def test_a_recipe_describes_the_model_as_data_and_rebuilds_it_fresh(minilm):
    from veil.defenses.dpsgd import DPSGD, PlainTraining, from_recipe

    bert, _ = minilm
    model = build_top_layers(num_classes=2, trained=1, max_length=16, hidden=(8,), init_seed=3, bert=bert)
    assert model.spec == {"kind": "minilm-top-layers", "trained": 1, "max_length": 16, "hidden": [8]}
    for defense in (DPSGD(epsilon=8.0, model=model, num_classes=2, init_seed=3), PlainTraining(model=model,
                                                                                                  num_classes=2,
                                                                                                  init_seed=3)):
        recipe = defense.recipe()
        assert recipe["params"]["model"] == model.spec
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PrivacyLeakWarning)
            shadow = from_recipe(recipe, rng=1)
        assert type(shadow) is type(defense) and shadow.model.spec == model.spec
        rebuilt = [p.detach() for p in shadow.model.parameters()]
        assert all(torch.equal(a, b.detach()) for a, b in zip(rebuilt, model.parameters()))  # same init
