"""The templates of the ``controlled`` source, by name and domain, and how the registry selects them.

The catalogue's order decides how invented names are handed out (:mod:`.generate`): keep it, and append new
templates at the end (a new template still changes some names of the others, see the package docstring).
"""

from __future__ import annotations

from collections.abc import Sequence

from conteb.config import closest_name
from curation.sources.controlled.geography import TEMPLATES as GEOGRAPHY
from curation.sources.controlled.organisations import TEMPLATES as ORGANISATIONS
from curation.sources.controlled.people import TEMPLATES as PEOPLE
from curation.sources.controlled.sport import TEMPLATES as SPORT
from curation.sources.controlled.template import Template
from curation.sources.controlled.things import TEMPLATES as THINGS

TEMPLATES: tuple[Template, ...] = (*GEOGRAPHY, *SPORT, *ORGANISATIONS, *PEOPLE, *THINGS)
BY_NAME = {template.name: template for template in TEMPLATES}
DOMAINS: dict[str, tuple[str, ...]] = {}
for _template in TEMPLATES:
    _template.check()
    DOMAINS[_template.domain] = (*DOMAINS.get(_template.domain, ()), _template.name)


def _unknown(what: str, name: str, known: Sequence[str]) -> str:
    close = closest_name(name, known)
    hint = f" (did you mean '{close}'?)" if close else ""
    return f"unknown {what} '{name}'{hint}; known: {', '.join(known)}"


def select_templates(templates: Sequence[str] | None = None, domains: Sequence[str] | None = None) -> list[Template]:
    """The templates named by ``templates``, or every template of ``domains``, or all of them (both None), in
    catalogue order; ``ValueError`` for an unknown name (with the closest known one), a name given twice, or both
    lists given."""
    if templates is not None and domains is not None:
        raise ValueError("set either templates or domains, not both")
    names = list(templates) if templates is not None else None
    if domains is not None:
        for domain in domains:
            if domain not in DOMAINS:
                raise ValueError(_unknown("domain", domain, list(DOMAINS)))
        if len(set(domains)) != len(domains):
            raise ValueError(f"domains: a domain is named twice in {list(domains)}")
        names = [name for domain in domains for name in DOMAINS[domain]]
    if names is None:
        return list(TEMPLATES)
    for name in names:
        if name not in BY_NAME:
            raise ValueError(_unknown("template", name, list(BY_NAME)))
    if len(set(names)) != len(names):
        raise ValueError(f"templates: a template is named twice in {names}")
    if not names:
        raise ValueError("name at least one template (or domain)")
    return [template for template in TEMPLATES if template.name in names]
