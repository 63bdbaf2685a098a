"""Reading the approved-templates file named by ``RAGWRIGHT_TEMPLATES``.

The rules live in :mod:`ragwright.core.templates`; this module only reads the file
(YAML, which JSON also is) and names the setting when it cannot.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from ragwright.core.templates import ApprovedTemplate, parse_templates
from ragwright.errors import ConfigError


def load_templates(path: Path | None) -> tuple[ApprovedTemplate, ...]:
    """The templates in ``path`` (none when ``path`` is ``None``).

    Raises:
        ConfigError: the file is missing, unreadable, not YAML, or breaks a rule
            (naming the entry and field).
    """
    if path is None:
        return ()
    try:
        data = yaml.safe_load(path.read_text("utf-8"))
    except OSError as error:
        raise ConfigError("RAGWRIGHT_TEMPLATES", f"cannot read {path}: {error}") from error
    except yaml.YAMLError as error:
        raise ConfigError("RAGWRIGHT_TEMPLATES", f"{path} is not YAML: {error}") from error
    return parse_templates(data, f"RAGWRIGHT_TEMPLATES ({path})")
