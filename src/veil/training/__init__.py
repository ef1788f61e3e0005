"""Training loops with a defense hook between the encoder and the task head."""

from veil.training.hooks import PlainHook, TextHideHook, TrainHook
from veil.training.loop import TrainConfig, TrainResult, finetune, predict_head, train_head

__all__ = ["TrainConfig", "TrainResult", "TrainHook", "PlainHook", "TextHideHook", "train_head", "finetune",
           "predict_head"]
