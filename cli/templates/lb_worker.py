"""A load-balanced endpoint: every worker runs one HTTP server and requests go straight to it.

Several routes share the endpoint. A route function gets the parsed JSON body (for GET, the query
parameters as a dict) and returns something JSON can carry.
"""

from gantry import Endpoint

# Scales on requests in flight; with min 0 the first request wakes a worker.
api = Endpoint(name="lb-worker", cpu="cpu3c-2-4", workers=(0, 3))


@api.post("/process")
def process(body: dict) -> dict:
    """Counts the words of the text it is given."""
    text = str(body.get("text", ""))
    return {"text": text, "words": len(text.split())}


@api.get("/health")
def health() -> dict:
    """Says the worker is up."""
    return {"status": "ok"}


@api.post("/reverse")
def reverse(body: dict) -> dict:
    """Returns the text backwards."""
    return {"reversed": str(body.get("text", ""))[::-1]}
