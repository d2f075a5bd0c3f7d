"""Plan documents for the generator tests: write, change the layout, one per ranked layout."""

import copy
import json
from pathlib import Path


def write_plan(tmp_path: Path, doc: dict, name: str = "plan.json") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(doc))
    return p


def with_layout(doc: dict, **changes) -> dict:
    doc = copy.deepcopy(doc)
    doc["best"]["layout"].update(changes)
    return doc


def ranked_docs(doc: dict) -> list[dict]:
    """One plan document per layout the planner ranked: many real layouts from one run."""
    out = []
    for est in doc["ranked"]:
        d = copy.deepcopy(doc)
        d["best"] = est
        out.append(d)
    return out
