"""SageMaker in a box: the embedded AWS (moto), a local SageMaker runtime gateway, and serving processes."""
