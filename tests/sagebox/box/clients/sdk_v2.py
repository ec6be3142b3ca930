"""A SageMaker Python SDK v2 user's deployment, as a notebook writes it: nothing here knows of Sagebox.

python sdk_v2.py MODEL_TARBALL OUT_JSON
"""

import json
import sys

import boto3
import sagemaker
from sagemaker.deserializers import JSONDeserializer
from sagemaker.model import Model
from sagemaker.predictor import Predictor
from sagemaker.serializers import JSONSerializer

IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/sagebox-serving:sdk-v2"
ROLE = "arn:aws:iam::123456789012:role/SageMakerExecution"
CONTEXT = "The Amazon rainforest covers most of the Amazon basin of South America."

tarball, out = sys.argv[1], sys.argv[2]
session = sagemaker.Session()  # no default_bucket: the SDK asks STS for the account
bucket = session.default_bucket()
model_data = session.upload_data(tarball, bucket=bucket, key_prefix="sdk-v2")
model = Model(image_uri=IMAGE, model_data=model_data, role=ROLE, sagemaker_session=session, predictor_cls=Predictor)
predictor = model.deploy(
    initial_instance_count=1,
    instance_type="ml.c6i.large",
    endpoint_name="sdk-v2-endpoint",
    serializer=JSONSerializer(),
    deserializer=JSONDeserializer(),
)
answer = predictor.predict({"inputs": {"question": "Which basin does it cover?", "context": CONTEXT}})
predictor.delete_model()  # before the endpoint: delete_endpoint also deletes the config delete_model reads
predictor.delete_endpoint()
client = boto3.client("sagemaker")
result = {
    "bucket": bucket,
    "answer": answer,
    "context": CONTEXT,
    "endpoints_after": [e["EndpointName"] for e in client.list_endpoints()["Endpoints"]],
    "models_after": [m["ModelName"] for m in client.list_models()["Models"]],
}
with open(out, "w") as handle:
    json.dump(result, handle)
