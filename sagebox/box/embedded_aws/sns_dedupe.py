"""moto's SNS, patched so that a SageMaker asynchronous-inference notification reaches its topic once.

SageMaker publishes one notification per asynchronous request ("Check prediction results",
https://docs.aws.amazon.com/sagemaker/latest/dg/async-inference-check-predictions.html). The box's gateway may have
to publish one again after a restart, word for word from its journal (sagebox.box.async_journal), not knowing
whether the first publish was delivered: the topic drops a second delivery of an identical `aws:sagemaker`
`InferenceResult` message and answers with the first one's MessageId. The digests live on the topic, so the box's
snapshot (sagebox.box.embedded_aws.persistence) keeps them. Any other message is delivered as moto delivers it.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from moto.sns.models import Topic

_original_publish = Topic.publish


def _sagemaker_notification(message: str) -> bool:
    try:
        parsed = json.loads(message)
    except ValueError:
        return False
    return isinstance(parsed, dict) and parsed.get("eventSource") == "aws:sagemaker" and "inferenceId" in parsed


def publish(self: Any, message: str, *args: Any, **kwargs: Any) -> str:
    if not isinstance(message, str) or not _sagemaker_notification(message):
        return str(_original_publish(self, message, *args, **kwargs))
    delivered: dict[str, str] = self.__dict__.setdefault("box_delivered", {})
    digest = hashlib.sha256(message.encode()).hexdigest()
    if digest in delivered:
        return delivered[digest]
    message_id = str(_original_publish(self, message, *args, **kwargs))
    delivered[digest] = message_id
    return message_id


def apply() -> None:
    Topic.publish = publish  # type: ignore[method-assign]
