"""The box's control plane, one controller per concern over one shared fleet state (sagebox.box.reconciler runs them).

As Kubernetes' controller-manager divides it: `fleet_state` holds what runs for which endpoint, `records` writes what
other processes read of it (routes.json, fleet.json), `describe` what DescribeEndpoint says of it; `deployments`
starts an endpoint config's fleet, `rollouts` shifts an update's traffic under the deployment guardrails, `retirement`
stops fleets that no longer serve, `scaling` changes instance counts and scales serverless variants to zero and back,
`health` replaces dead or failing instances. `context` is what they all share: the state, the files, box time, the
embedded SageMaker's endpoints and how work goes to the background.
"""
