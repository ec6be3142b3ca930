"""Text generation in the serving container (decoder LLMs): the parts that need no model.

`request` reads the two payloads SageMaker LLM containers accept on `/invocations` (TGI/LMI's `{"inputs",
"parameters", "stream"}` and the OpenAI Messages API's `{"messages", ...}`) into one typed request, or refuses it with a
400 reason; `sampling` chooses each next token from its logits (greedy, or temperature / top-k / top-p / repetition
penalty with a per-request seed, so a request's tokens never depend on what shares its batch); `detokenize` turns
token ids into text as they come without splitting a character; `stops` ends a generation at a stop sequence without
streaming any part of one it may hold back; `events` writes the answers and the server-sent events of both APIs.
"""
