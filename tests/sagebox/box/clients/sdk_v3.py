"""A SageMaker Python SDK v3 user's deployment through `sagemaker.core.resources`: nothing here knows of Sagebox.

python sdk_v3.py MODEL_DATA_URL OUT_JSON
"""

import json
import sys

from sagemaker.core.resources import Endpoint, EndpointConfig, Model
from sagemaker.core.shapes import ContainerDefinition, ProductionVariant

IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/sagebox-serving:sdk-v3"
ROLE = "arn:aws:iam::123456789012:role/SageMakerExecution"
CONTEXT = "The Amazon rainforest covers most of the Amazon basin of South America."

model_data, out = sys.argv[1], sys.argv[2]
model = Model.create(
    model_name="sdk-v3-model",
    primary_container=ContainerDefinition(image=IMAGE, model_data_url=model_data),
    execution_role_arn=ROLE,
)
config = EndpointConfig.create(
    endpoint_config_name="sdk-v3-config",
    production_variants=[
        ProductionVariant(
            variant_name="AllTraffic", model_name="sdk-v3-model", instance_type="ml.c6i.large", initial_instance_count=1
        )
    ],
)
endpoint = Endpoint.create(endpoint_name="sdk-v3-endpoint", endpoint_config_name="sdk-v3-config")
endpoint.wait_for_status("InService")
status = Endpoint.get("sdk-v3-endpoint").endpoint_status
output = endpoint.invoke(
    body=json.dumps({"inputs": {"question": "Which basin does it cover?", "context": CONTEXT}}),
    content_type="application/json",
    accept="application/json",
)
body = output.body.read() if hasattr(output.body, "read") else output.body
endpoint.delete()
config.delete()
model.delete()
deleted = "sdk-v3-endpoint" not in [e.endpoint_name for e in Endpoint.get_all()]
with open(out, "w") as handle:
    json.dump({"status": status, "answer": json.loads(body), "context": CONTEXT, "deleted": deleted}, handle)
