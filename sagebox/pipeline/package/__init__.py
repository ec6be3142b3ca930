"""Stage 7, package. In: a servable model directory (export/, quantize/ or compile/). Out: SageMaker's
`model.tar.gz`, byte-for-byte reproducible and holding only vouched-for files (`tarball`), uploaded to S3 with
SHA-256 checksums S3 verifies (`upload`)."""
