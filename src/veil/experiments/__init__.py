"""Experiment runners, one package per paper and a module per table or figure, and the result-record schema they
write.

* :mod:`.texthide`: TextHide (Huang et al. 2020): utility (:mod:`.texthide.eval`), representation leakage
  (:mod:`.texthide.retrieval`), adaptive attacks (:mod:`.texthide.attacks`);
* :mod:`.sentdp`: SentDP (Meehan et al. 2022): embeddings (:mod:`.sentdp.embed`), utility (:mod:`.sentdp.eval`),
  privacy audits (:mod:`.sentdp.audit`, :mod:`.sentdp.empirical`);
* :mod:`.adversarial`: Coavoux et al. (2018), attribute inference under adversarial training;
* :mod:`.obfuscation`: Hu et al. (2020), obfuscated parsing and word recovery;
* :mod:`.federated`: federated TextHide: utility, the gradients paper's Table 2, attacks on recorded runs and the
  end-to-end chain.
"""

from veil.results import Metric, ResultRecord, environment, git_commit, load_records

__all__ = ["Metric", "ResultRecord", "environment", "git_commit", "load_records"]
