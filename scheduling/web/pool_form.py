"""The submission forms' node-pool inputs (design §16.3): tolerations, one per line (`key=value:Effect`,
`key:Effect` or `key` for any value, `*` for every taint), and a node selector, `label=value` per line; both
become the API body's fields, validated there."""

from nodes.taint_input import parse_pool_lines

POOL_FORM_FIELDS = ("tolerations", "node_selector")


def pool_payload(post) -> dict:
    selector = {}
    for line in post.get("node_selector", "").replace(",", "\n").splitlines():
        if line.strip():
            key, _, value = line.partition("=")
            selector[key.strip()] = value.strip()
    return {"tolerations": parse_pool_lines(post.get("tolerations", ""), with_effect=False),
            "node_selector": selector}
