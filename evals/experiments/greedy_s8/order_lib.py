def reorder(s):
    if isinstance(s, list):
        return [reorder(x) for x in s]
    if not isinstance(s, dict):
        return s
    out = {k: (reorder(v) if k not in ("enum", "const", "default", "required", "properties") else v) for k, v in s.items()}
    if isinstance(s.get("properties"), dict):
        req = s.get("required", [])
        props = {k: reorder(v) for k, v in s["properties"].items()}
        out["properties"] = {**{k: props[k] for k in props if k in req}, **{k: props[k] for k in props if k not in req}}
    return out

