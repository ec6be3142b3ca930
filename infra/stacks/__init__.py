"""The CDK stacks, put together by infra/app.py: the artifacts stack (KMS key, model and data-capture bucket, image
repository) and one endpoint stack per target (execution role, models, endpoint config, blue/green endpoint,
autoscaling), with the alarms that roll a deployment back and a dashboard (monitoring)."""
