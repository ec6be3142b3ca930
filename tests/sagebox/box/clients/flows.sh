#!/usr/bin/env bash
# Run inside `unshare --net`: a box and three real clients on loopback alone.
# Environment: SAGEBOX (the CLI), SAGEBOX_STATE_DIR, WORK (model.tar.gz, broken.tar.gz; outputs), V2, V3 (venvs),
# CLIENTS (this folder).
set -euo pipefail
ip link set lo up
ip route show table all > "$WORK/routes.txt"
# Anything off this machine is unreachable here (the proof that the flows below needed nothing outside).
if python3 -c 'import socket; socket.create_connection(("192.0.2.1", 443), timeout=2)' 2>/dev/null; then
  echo reachable > "$WORK/outside.txt"
else
  echo unreachable > "$WORK/outside.txt"
fi

"$SAGEBOX" up --targets none
# What the AWS proxy served, kept before `sagebox down` removes the box's logs.
trap 'cp "$SAGEBOX_STATE_DIR/logs/aws-proxy.log" "$WORK/" 2> /dev/null || true; "$SAGEBOX" down > /dev/null' EXIT
eval "$("$SAGEBOX" env)"

echo "== SageMaker Python SDK v2"
"$V2/bin/python" "$CLIENTS/sdk_v2.py" "$WORK/model.tar.gz" "$WORK/sdk-v2.json"

echo "== AWS CLI (v1): the C6i INT8 post's flow"
aws() { "$V2/bin/aws" "$@"; }
image=123456789012.dkr.ecr.us-east-1.amazonaws.com/sagebox-serving:cli
role=arn:aws:iam::123456789012:role/SageMakerExecution
aws s3 mb s3://cli-models
aws s3 cp "$WORK/model.tar.gz" s3://cli-models/qa/model.tar.gz
aws s3 cp "$WORK/broken.tar.gz" s3://cli-models/broken/model.tar.gz
for name in qa broken; do
  aws sagemaker create-model --model-name "cli-$name" --execution-role-arn "$role" \
    --primary-container "Image=$image,ModelDataUrl=s3://cli-models/$name/model.tar.gz"
  aws sagemaker create-endpoint-config --endpoint-config-name "cli-$name" \
    --production-variants "VariantName=AllTraffic,ModelName=cli-$name,InitialInstanceCount=1,InstanceType=ml.c6i.large"
  aws sagemaker create-endpoint --endpoint-name "cli-$name" --endpoint-config-name "cli-$name"
done
aws sagemaker wait endpoint-in-service --endpoint-name cli-qa
printf '%s' '{"question": "Which basin does it cover?", "context": "The Amazon rainforest covers most of the Amazon basin of South America."}' > "$WORK/question.json"
aws sagemaker-runtime invoke-endpoint --endpoint-name cli-qa --content-type application/json \
  --body "fileb://$WORK/question.json" "$WORK/cli-answer.json"
sleep 1  # the box ships instance output every 0.25 s
aws logs filter-log-events --log-group-name /aws/sagemaker/Endpoints/cli-qa > "$WORK/cli-logs.json"
if aws sagemaker wait endpoint-in-service --endpoint-name cli-broken 2> "$WORK/cli-broken-wait.txt"; then
  echo "the broken model's endpoint came InService" >&2
  exit 1
fi
aws sagemaker describe-endpoint --endpoint-name cli-broken > "$WORK/cli-broken-describe.json"
sleep 1
aws logs filter-log-events --log-group-name /aws/sagemaker/Endpoints/cli-broken > "$WORK/cli-broken-logs.json"

echo "== SageMaker Python SDK v3 (sagemaker.core.resources)"
"$V3/bin/python" "$CLIENTS/sdk_v3.py" s3://cli-models/qa/model.tar.gz "$WORK/sdk-v3.json"
