"""What a node holds already (design §17.2, model distribution), as two agent labels: the model artifacts and the
container images present on it, comma-separated. The agent writes them (`nodes.agent`), the scheduler's
`model-locality` plugin reads them; plain Python, imported by both."""

MODELS_LABEL = "heteroflow.io/models"
IMAGES_LABEL = "heteroflow.io/images"
# An agent label's value is at most 4 KiB (heteroflow_site.validation): the names past it are left out.
LABEL_MAX_LENGTH = 4096


def encode_names(names) -> str:
    """Sorted, without duplicates, cut at a whole name so that it fits one label."""
    text = ""
    for name in sorted({name for name in names if name and "," not in name}):
        candidate = f"{text},{name}" if text else name
        if len(candidate) > LABEL_MAX_LENGTH:
            break
        text = candidate
    return text


def decode_names(text: str | None) -> frozenset[str]:
    return frozenset(name for name in (text or "").split(",") if name)


def image_name(reference: str) -> str:
    """An image reference as `docker images` lists it: with its tag, `latest` when none is given."""
    if not reference or "@" in reference:
        return reference
    last = reference.rsplit("/", 1)[-1]
    return reference if ":" in last else f"{reference}:latest"
