"""The YAML loader every reader of manifests and files uses.

libyaml's loader (``yaml.CSafeLoader``) when PyYAML was built with it: the same documents as
``yaml.SafeLoader``, ten times faster to read. PyYAML's pure-Python loader otherwise.
"""

from __future__ import annotations

from typing import Any

import yaml

LOADER: Any = getattr(yaml, "CSafeLoader", None) or yaml.SafeLoader

__all__ = ["LOADER", "yaml"]
