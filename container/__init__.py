"""The Sagebox serving container: SageMaker's BYOC contract (`serve`, /ping, /invocations) for extractive QA."""

__version__ = "0.1.0"
