"""The runtime gateway's parts (sagebox.box.runtime_gateway assembles them into one Starlette app).

`wire` is what the SageMaker runtime API says on the wire (headers, limits, error answers); `picking` chooses the
fleet, variant and instance that answer; `forwarding` calls the instance; `metering` measures invocations and
publishes them to CloudWatch; `cold_starts` holds a serverless variant's requests while it starts; `shadowing` sends
shadow variants their copies; `invocations` answers InvokeEndpoint (and its response stream); `async_invocations`
answers InvokeEndpointAsync and reports its backlog; `flushing` writes and publishes, once a second and off the
request path, what the others gathered.
"""
