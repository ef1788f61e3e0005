"""SentDP (Meehan, Mrini and Chaudhuri, ACL 2022): DeepCandidate and its parts.

* :mod:`.mechanism`: :class:`DeepCandidate`, the exponential mechanism over public candidates (the guarantee);
* :mod:`.sampling`: the exact sampler of the exponential mechanism (why it is exact, what it replaced, its speed);
* :mod:`.depth`: approximate Tukey depth (the utility): projection sets, the histogram path and the App. A.1
  reference loop;
* :mod:`.levels`: the fast path, many documents at once and the depth level by level;
* :mod:`.recoder`: the cluster-preserving sentence recoder H (Sec. 4.3, App. A.3);
* :mod:`.pipeline`: :class:`SentDPPipeline`, text documents in, epsilon-SentDP embeddings out;
* :mod:`.controls`: deliberately broken DeepCandidate variants (negative controls) that the audits must catch.

The baselines (:mod:`veil.defenses.truncation`, :mod:`veil.defenses.metric_dp`) stay outside this package.
"""

from veil.defenses.sentdp.depth import (DEPTHS, ProjectionSet, candidates_digest, depth_fast, depth_histogram,
                                        depth_reference, draw_projections, project_sentences)
from veil.defenses.sentdp.levels import depth_batch, iter_depths
from veil.defenses.sentdp.mechanism import DeepCandidate, Release, Releases, check_candidates, check_document
from veil.defenses.sentdp.pipeline import SentDPPipeline, split_documents, state_sha256
from veil.defenses.sentdp.recoder import Recoder, RecoderConfig, document_means, train_recoder
from veil.defenses.sentdp.sampling import ExactSampler

__all__ = ["DeepCandidate", "Release", "Releases", "check_candidates", "check_document", "ExactSampler",
           "DEPTHS", "ProjectionSet", "candidates_digest", "depth_fast", "depth_histogram", "depth_batch",
           "iter_depths", "depth_reference", "draw_projections", "project_sentences", "SentDPPipeline",
           "split_documents", "state_sha256", "Recoder", "RecoderConfig", "document_means", "train_recoder"]
