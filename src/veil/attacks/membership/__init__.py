"""Membership inference on a released model (release kind ``model``): was this example in the training set?

* :mod:`.observe`: :class:`ModelAccess` (what the attacker gets: black-box logits, the candidates, the public
  recipe), :class:`MembershipTruth` (what only the scorer gets), :func:`membership_game` (members, non-members and
  the attacker's population drawn with the experiment's seed);
* :mod:`.loss`: :class:`LossThreshold` (Yeom et al. 2018), registry ``membership-loss``;
* :mod:`.lira`: :class:`LiRA` (Carlini et al. 2022), online and offline, ``membership-lira``;
* :mod:`.rmia`: :class:`RMIA` (Zarifzadeh et al. 2024), offline with 1-2 reference models, ``membership-rmia``;
* :mod:`.scoring`: AUC and TPR at 1% / 0.1% FPR with stratified bootstrap intervals, ROC arrays.
"""

from veil.attacks.membership.lira import LiRA
from veil.attacks.membership.loss import LossThreshold
from veil.attacks.membership.observe import MembershipGame, MembershipTruth, ModelAccess, membership_game
from veil.attacks.membership.rmia import RMIA
from veil.attacks.membership.scoring import MembershipScore, MembershipScores, Roc, score_membership

__all__ = ["ModelAccess", "MembershipTruth", "MembershipGame", "membership_game", "LossThreshold", "LiRA", "RMIA",
           "MembershipScores", "MembershipScore", "Roc", "score_membership"]
